"""Generate the cross-lingual labelled recall set, set X: `python -m bench.ltm_recall_data_x`
writes bench/data/ltm_recall/recall_set_x.json (committed; deterministic).

What it models: twelve bilingual users who write English and Chinese in the same conversation.
Each user's scope holds about ten personal facts, some stated in English and some in Chinese,
same-topic distractors about other people in both languages for every fact, general questions
and small talk in both languages, and the assistant's reply to each message in the message's
language. Every query asks about one fact in the other language than the fact was stated in
(a Chinese question about an English memory, and the reverse), in several phrasings: a full
question, a second paraphrase, and for some fact kinds a bare keyword ("马拉松", "allergy"). Each
fact also gets one control question in its own language (`type` same_language), which shows
whether recall across languages costs same-language recall in a mixed scope.

Each query carries `lang` (the query's language) and `fact_lang` (the language of the memory it
targets: the other one, except for the controls). The users `x-01` .. `x-06` are the tuning half
(`XLING_TUNING_CONVERSATIONS` in bench/recall_bench.py); `x-07` .. `x-12` are held out and were
not looked at while choosing any change. Same memory shape as recall_set.json. Everything below
was written for this project; nothing is fetched.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.ltm_recall_data import (
    EN_ANSWER,
    EN_ASKS,
    EN_REPLIES,
    EN_SMALL_TALK,
    EN_TASKS,
    EN_TIP,
    EN_TOPICS,
    ZH_ANSWER,
    ZH_ASKS,
    ZH_REPLIES,
    ZH_SMALL_TALK,
    ZH_TASKS,
    ZH_TIP,
    ZH_TOPICS,
    Memory,
    write,
)

OUT = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set_x.json"
SEED = 20261127
USERS = 12
SESSIONS = 6
FACTS_PER_USER = 10


@dataclass
class Side:
    """One language's templates of a fact kind: how the user states it (`say`), the questions
    about it (`ask`, `keyword`) and distractors about other people (`distract`, `{..._other}`)."""

    say: list[str]
    ask: list[str]
    distract: list[str]
    keyword: list[str] = field(default_factory=list)


@dataclass
class XFact:
    kind: str
    values: list[tuple[dict[str, str], dict[str, str]]]  # (English values, the same in Chinese)
    en: Side
    zh: Side


FACTS = [
    XFact(
        "sibling",
        [({"rel": "sister", "city": "Vancouver"}, {"rel": "妹妹", "city": "温哥华"}),
         ({"rel": "brother", "city": "Melbourne"}, {"rel": "哥哥", "city": "墨尔本"}),
         ({"rel": "sister", "city": "London"}, {"rel": "姐姐", "city": "伦敦"}),
         ({"rel": "brother", "city": "Shenzhen"}, {"rel": "弟弟", "city": "深圳"}),
         ({"rel": "sister", "city": "Seattle"}, {"rel": "妹妹", "city": "西雅图"}),
         ({"rel": "brother", "city": "Paris"}, {"rel": "哥哥", "city": "巴黎"})],
        en=Side(say=["My {rel} lives in {city} now, moved there for good last year.",
                     "My {rel} settled in {city} a while ago and won't ever come back."],
                ask=["Where does my {rel} live?", "Which city is my {rel} based in these days?"],
                distract=["My colleague's {rel} just moved to {city_other}.",
                          "What's the weather like in {city_other} in spring?"]),
        zh=Side(say=["我{rel}现在住在{city}，去年搬过去就不打算回来了。", "我{rel}早就在{city}定居了。"],
                ask=["我{rel}住在哪里？", "我{rel}现在在哪个城市生活？"],
                distract=["同事的{rel}刚搬去了{city_other}。", "{city_other}春天的天气怎么样？"]),
    ),
    XFact(
        "job",
        [({"job": "a data engineer"}, {"job": "数据工程师"}), ({"job": "a pharmacist"}, {"job": "药剂师"}),
         ({"job": "an architect"}, {"job": "建筑师"}), ({"job": "a primary school teacher"}, {"job": "小学老师"}),
         ({"job": "an airline pilot"}, {"job": "飞行员"}), ({"job": "a tax lawyer"}, {"job": "税务律师"})],
        en=Side(say=["I work as {job}, long days but I really enjoy it.",
                     "Being {job} keeps me busy, I barely have a free evening."],
                ask=["What do I do for a living?", "What's my profession?"],
                keyword=["my job"],
                distract=["My cousin is thinking about becoming {job_other}.",
                          "How much does {job_other} usually earn?"]),
        zh=Side(say=["我是一名{job}，每天都很忙，但我挺喜欢这份工作的。", "当{job}真的很累，晚上基本没空。"],
                ask=["我的工作是什么？", "我是做什么职业的？"],
                keyword=["工作"],
                distract=["我表哥想转行当{job_other}。", "{job_other}一般收入多少？"]),
    ),
    XFact(
        "allergy",
        [({"x": "cats"}, {"x": "猫"}), ({"x": "peanuts"}, {"x": "花生"}), ({"x": "pollen"}, {"x": "花粉"}),
         ({"x": "penicillin"}, {"x": "青霉素"}), ({"x": "shrimp"}, {"x": "虾"}), ({"x": "dust mites"}, {"x": "尘螨"})],
        en=Side(say=["I'm allergic to {x}, it's been like that since I was a kid.",
                     "Heads up: I get a nasty allergic reaction from {x}."],
                ask=["What am I allergic to?", "Is there anything I react badly to?"],
                keyword=["allergy"],
                distract=["My friend is allergic to {x_other}.", "What helps with an allergy to {x_other}?"]),
        zh=Side(say=["我对{x}过敏，从小就这样。", "提醒一下，我一碰到{x}就过敏。"],
                ask=["我对什么过敏？", "有什么东西会让我过敏？"],
                keyword=["过敏"],
                distract=["我朋友对{x_other}过敏。", "对{x_other}过敏有什么办法缓解？"]),
    ),
    XFact(
        "race",
        [({"event": "the Berlin marathon"}, {"event": "柏林马拉松"}), ({"event": "the Tokyo marathon"}, {"event": "东京马拉松"}),
         ({"event": "the Boston marathon"}, {"event": "波士顿马拉松"}), ({"event": "the Shanghai marathon"}, {"event": "上海马拉松"}),
         ({"event": "the London marathon"}, {"event": "伦敦马拉松"}), ({"event": "the Chicago marathon"}, {"event": "芝加哥马拉松"})],
        en=Side(say=["I finished {event} in just under four hours, my legs are still sore!",
                     "Crossed the finish line of {event} last Sunday, first one ever."],
                ask=["Which race did I run?", "What long-distance event did I complete?"],
                keyword=["marathon"],
                distract=["My neighbour is training for {event_other}.", "How hard is it to qualify for {event_other}?"]),
        zh=Side(say=["我跑完了{event}，成绩不到四个小时，腿到现在还疼！", "上周日第一次跑完了{event}。"],
                ask=["我跑过哪个比赛？", "我完成过什么长跑赛事？"],
                keyword=["马拉松"],
                distract=["邻居在备战{event_other}。", "{event_other}的参赛资格难拿吗？"]),
    ),
    XFact(
        "pet",
        [({"pet": "a golden retriever", "name": "Buddy"}, {"pet": "一只金毛", "name": "旺财"}),
         ({"pet": "a grey cat", "name": "Smokey"}, {"pet": "一只灰猫", "name": "煤球"}),
         ({"pet": "a rabbit", "name": "Snowball"}, {"pet": "一只兔子", "name": "雪球"}),
         ({"pet": "a parrot", "name": "Mango"}, {"pet": "一只鹦鹉", "name": "芒果"}),
         ({"pet": "a hamster", "name": "Peanut"}, {"pet": "一只仓鼠", "name": "豆豆"}),
         ({"pet": "a corgi", "name": "Dumpling"}, {"pet": "一只柯基", "name": "饺子"})],
        en=Side(say=["We have {pet} called {name}, it follows me around the flat.",
                     "{name}, our {pet_bare}, chewed my slippers again."],
                ask=["What kind of pet do I have?", "What's my pet called?"],
                keyword=["pet"],
                distract=["My friend is thinking of getting {pet_other}.", "How long does {pet_other} usually live?"]),
        zh=Side(say=["我家养了{pet}，叫{name}，天天跟着我转。", "我家{name}又把我的拖鞋咬坏了，这只{pet_bare}真调皮。"],
                ask=["我养的是什么宠物？", "我的宠物叫什么名字？"],
                keyword=["宠物"],
                distract=["朋友在考虑养{pet_other}。", "{pet_other}一般能活多久？"]),
    ),
    XFact(
        "hobby",
        [({"x": "pottery"}, {"x": "陶艺"}), ({"x": "rock climbing"}, {"x": "攀岩"}), ({"x": "calligraphy"}, {"x": "书法"}),
         ({"x": "salsa dancing"}, {"x": "萨尔萨舞"}), ({"x": "film photography"}, {"x": "胶片摄影"}), ({"x": "chess"}, {"x": "国际象棋"})],
        en=Side(say=["Every Saturday morning I have my {x} class, best part of the week.",
                     "I've really got into {x} lately, I spend every weekend on it."],
                ask=["What hobby am I into?", "What do I do on Saturday mornings?"],
                distract=["My brother finds {x_other} boring.", "Is {x_other} hard to learn as an adult?"]),
        zh=Side(say=["每周六上午我都去上{x}课，这是我一周最开心的时候。", "最近迷上了{x}，周末全花在这上面了。"],
                ask=["我有什么爱好？", "我周六上午一般做什么？"],
                distract=["我哥觉得{x_other}很无聊。", "成年人学{x_other}难吗？"]),
    ),
    XFact(
        "drink",
        [({"x": "an oat latte"}, {"x": "燕麦拿铁"}), ({"x": "jasmine tea"}, {"x": "茉莉花茶"}),
         ({"x": "black coffee"}, {"x": "黑咖啡"}), ({"x": "hot chocolate"}, {"x": "热可可"}),
         ({"x": "green tea"}, {"x": "绿茶"}), ({"x": "warm lemon water"}, {"x": "温柠檬水"})],
        en=Side(say=["My mornings start with {x}, I can't function without it.",
                     "First thing I do every day is make {x}."],
                ask=["What do I drink in the morning?", "What should you make me to drink at breakfast?"],
                distract=["My boss drinks {x_other} all day long.", "Is {x_other} bad for your stomach?"]),
        zh=Side(say=["我每天早上都要喝{x}，不喝就没精神。", "每天起床第一件事就是泡一杯{x}。"],
                ask=["我早上喜欢喝什么？", "早餐给我准备什么喝的？"],
                distract=["我老板一整天都在喝{x_other}。", "{x_other}伤胃吗？"]),
    ),
    XFact(
        "car",
        [({"car": "a red Mazda"}, {"car": "一辆红色马自达"}), ({"car": "a Volkswagen Golf"}, {"car": "一辆大众高尔夫"}),
         ({"car": "a Toyota Prius"}, {"car": "一辆丰田普锐斯"}), ({"car": "a Honda Accord"}, {"car": "一辆本田雅阁"}),
         ({"car": "a BYD Seal"}, {"car": "一辆比亚迪海豹"}), ({"car": "an old Volvo estate"}, {"car": "一辆旧沃尔沃旅行车"})],
        en=Side(say=["I drive {car}, bought it second-hand two years ago.", "{car_cap} is what I commute in every day."],
                ask=["What car do I drive?", "What vehicle do I own?"],
                distract=["My dad is looking at buying {car_other}.", "Is {car_other} expensive to insure?"]),
        zh=Side(say=["我开的是{car}，两年前买的二手车。", "我每天开{car}上下班。"],
                ask=["我开什么车？", "我的车是什么牌子的？"],
                distract=["我爸在考虑买{car_other}。", "{car_other}的保险贵吗？"]),
    ),
    XFact(
        "birthday",
        [({"date": "March 3"}, {"date": "3月3日"}), ({"date": "July 19"}, {"date": "7月19日"}),
         ({"date": "October 8"}, {"date": "10月8日"}), ({"date": "December 12"}, {"date": "12月12日"}),
         ({"date": "May 21"}, {"date": "5月21日"}), ({"date": "September 30"}, {"date": "9月30日"})],
        en=Side(say=["My birthday is on {date}, a quiet dinner would be perfect.",
                     "Don't forget, {date} is my birthday and I hate surprise parties."],
                ask=["When is my birthday?", "What day should you wish me a happy birthday?"],
                keyword=["birthday"],
                distract=["My mom's birthday is {date_other}.", "What's a good gift for someone born on {date_other}?"]),
        zh=Side(say=["我的生日是{date}，安安静静吃顿饭就好。", "别忘了，{date}是我生日，我最怕惊喜派对。"],
                ask=["我生日是哪天？", "哪天该祝我生日快乐？"],
                keyword=["生日"],
                distract=["我妈妈的生日是{date_other}。", "{date_other}出生的人送什么礼物好？"]),
    ),
    XFact(
        "home",
        [({"city": "Chengdu"}, {"city": "成都"}), ({"city": "Hangzhou"}, {"city": "杭州"}),
         ({"city": "Singapore"}, {"city": "新加坡"}), ({"city": "Sydney"}, {"city": "悉尼"}),
         ({"city": "Munich"}, {"city": "慕尼黑"}), ({"city": "Toronto"}, {"city": "多伦多"})],
        en=Side(say=["I've lived in {city} for five years now and still love the food.",
                     "Home for me is {city}, we rent a small flat near the river."],
                ask=["Which city do I live in?", "Where is my home?"],
                distract=["Is {city_other} an expensive place to live?", "My manager grew up in {city_other}."]),
        zh=Side(say=["我在{city}住了五年了，还是很爱这里的美食。", "我家在{city}，租了条河边的小公寓。"],
                ask=["我住在哪个城市？", "我家在哪儿？"],
                distract=["{city_other}的生活成本高吗？", "我领导是在{city_other}长大的。"]),
    ),
    XFact(
        "language",
        [({"x": "Japanese"}, {"x": "日语"}), ({"x": "Spanish"}, {"x": "西班牙语"}), ({"x": "German"}, {"x": "德语"}),
         ({"x": "Korean"}, {"x": "韩语"}), ({"x": "French"}, {"x": "法语"}), ({"x": "Italian"}, {"x": "意大利语"})],
        en=Side(say=["I'm learning {x}, two evening lessons a week.", "Started {x} classes in January, it's tough but fun."],
                ask=["Which foreign language am I studying?", "What language course am I taking?"],
                distract=["My coworker wants to learn {x_other}.", "Is {x_other} grammar difficult?"]),
        zh=Side(say=["我在学{x}，每周上两次晚课。", "一月份开始报了{x}班，挺难但很有意思。"],
                ask=["我在学什么外语？", "我报的是什么语言课？"],
                distract=["我同事想学{x_other}。", "{x_other}的语法难不难？"]),
    ),
    XFact(
        "diet",
        [({"x": "vegetarian"}, {"x": "吃素"}), ({"x": "off sugar"}, {"x": "戒糖"}),
         ({"x": "avoiding red meat"}, {"x": "不吃红肉"}), ({"x": "gluten-free"}, {"x": "不吃含麸质的东西"}),
         ({"x": "vegan"}, {"x": "吃全素"}), ({"x": "dairy-free"}, {"x": "不碰奶制品"})],
        en=Side(say=["Since last spring I've been {x}, and I feel much better.", "Just so you know, I'm {x} these days."],
                ask=["Do I follow any diet?", "What should you keep in mind when picking a restaurant for me?"],
                distract=["My friend tried going {x_other} but gave up.", "Is being {x_other} healthy long term?"]),
        zh=Side(say=["从去年春天开始我就{x}了，感觉好多了。", "跟你说一声，我现在{x}。"],
                ask=["我饮食上有什么讲究？", "帮我选餐厅要注意什么？"],
                distract=["我朋友试过{x_other}，没坚持下来。", "长期{x_other}健康吗？"]),
    ),
    XFact(
        "instrument",
        [({"x": "the cello"}, {"x": "大提琴"}), ({"x": "the guitar"}, {"x": "吉他"}), ({"x": "the piano"}, {"x": "钢琴"}),
         ({"x": "the violin"}, {"x": "小提琴"}), ({"x": "the drums"}, {"x": "架子鼓"}), ({"x": "the saxophone"}, {"x": "萨克斯"})],
        en=Side(say=["I've played {x} for ten years, I practise most nights.",
                     "Playing {x} is how I unwind after work."],
                ask=["What instrument do I play?", "Which musical instrument am I good at?"],
                distract=["My nephew just started {x_other} lessons.", "How expensive is a decent {x_other_bare}?"]),
        zh=Side(say=["我学{x}已经十年了，几乎每天晚上都练。", "下班后练一会儿{x}是我放松的方式。"],
                ask=["我会什么乐器？", "我擅长哪种乐器？"],
                distract=["我侄子刚开始学{x_other}。", "一把像样的{x_other}要多少钱？"]),
    ),
    XFact(
        "trip",
        [({"place": "Kyoto", "what": "the temples"}, {"place": "京都", "what": "寺庙"}),
         ({"place": "Iceland", "what": "the glaciers"}, {"place": "冰岛", "what": "冰川"}),
         ({"place": "Bali", "what": "the rice terraces"}, {"place": "巴厘岛", "what": "梯田"}),
         ({"place": "Yunnan", "what": "the old towns"}, {"place": "云南", "what": "古镇"}),
         ({"place": "Norway", "what": "the fjords"}, {"place": "挪威", "what": "峡湾"}),
         ({"place": "Egypt", "what": "the pyramids"}, {"place": "埃及", "what": "金字塔"})],
        en=Side(say=["Just got back from {place}, {what} were unforgettable.", "Our holiday in {place} was amazing, especially {what}."],
                ask=["Where did I go on my last trip?", "Which place did I visit on holiday?"],
                distract=["My colleague is planning a trip to {place_other}.", "What's the best season to visit {place_other}?"]),
        zh=Side(say=["刚从{place}回来，{what}让我难忘。", "这次去{place}度假太棒了，尤其是{what}。"],
                ask=["我上次旅行去了哪里？", "我最近去哪儿度假了？"],
                distract=["同事打算去{place_other}旅游。", "什么季节去{place_other}最好？"]),
    ),
]


def _values(fact: XFact, index: int, lang: str, rng: random.Random) -> dict[str, str]:
    """One user's values of a fact in `lang`, with `{key_other}` from another user's (near misses)."""
    side = 0 if lang == "en" else 1
    other = (index + 1 + rng.randrange(len(fact.values) - 1)) % len(fact.values)
    own, theirs = fact.values[index][side], fact.values[other][side]
    out = {**own, **{f"{k}_other": v for k, v in theirs.items()}}
    for key, value in list(out.items()):  # "a grey cat" -> "grey cat", "the cello" -> "cello"
        bare = value
        for article in ("a ", "an ", "the ", "一只", "一辆"):
            if bare.startswith(article):
                bare = bare[len(article):]
        out[f"{key}_bare"] = bare
        out[f"{key}_cap"] = value[:1].upper() + value[1:]
    return out


def _user(number: int, rng: random.Random) -> tuple[list[Memory], list[dict[str, Any]]]:
    name = f"x-{number:02d}"
    start = datetime(2025, 3, 3, 9, tzinfo=UTC) + timedelta(days=5 * number)
    session_start = [start]
    for _ in range(SESSIONS - 1):
        session_start.append(session_start[-1] + timedelta(days=rng.randint(5, 15), hours=rng.randint(-3, 8)))

    facts = rng.sample(FACTS, FACTS_PER_USER)
    stated = ["en"] * (FACTS_PER_USER // 2) + ["zh"] * (FACTS_PER_USER - FACTS_PER_USER // 2)
    rng.shuffle(stated)
    lines: list[list[tuple[str, str, str | None]]] = [[] for _ in range(SESSIONS)]  # (lang, text, fact kind)
    plan: list[tuple[XFact, str, int]] = []
    for fact, lang in zip(facts, stated, strict=True):
        index = (number + FACTS.index(fact)) % len(fact.values)
        plan.append((fact, lang, index))
        side = fact.en if lang == "en" else fact.zh
        lines[rng.randrange(SESSIONS)].append((lang, rng.choice(side.say).format(**_values(fact, index, lang, rng)), fact.kind))
        # Distractors in both languages: a question in either language meets same-language near misses.
        for d_lang, d_side in (("en", fact.en), ("zh", fact.zh)):
            for template in d_side.distract:
                lines[rng.randrange(SESSIONS)].append((d_lang, template.format(**_values(fact, index, d_lang, rng)), None))

    en_chatter = ([a.format(t=t) for t in rng.sample(EN_TOPICS, 8) for a in rng.sample(EN_ASKS, 1)]
                  + [EN_TIP.format(t=t) for t in rng.sample(EN_TASKS, 3)] + rng.sample(EN_SMALL_TALK, 4))
    zh_chatter = ([a.format(t=t) for t in rng.sample(ZH_TOPICS, 8) for a in rng.sample(ZH_ASKS, 1)]
                  + [ZH_TIP.format(t=t) for t in rng.sample(ZH_TASKS, 3)] + rng.sample(ZH_SMALL_TALK, 4))
    chatter = [("en", t) for t in en_chatter] + [("zh", t) for t in zh_chatter]
    rng.shuffle(chatter)
    for i, (lang, text) in enumerate(chatter):
        lines[i % SESSIONS].append((lang, text, None))

    memories: list[Memory] = []
    labelled: dict[str, str] = {}
    for session, session_lines in enumerate(lines):
        rng.shuffle(session_lines)
        at = session_start[session]
        for lang, text, kind in session_lines:
            memory = Memory(f"{name}-s{session + 1:02d}-m{len(memories):03d}", name, session + 1, at.isoformat(), "user", text)
            memories.append(memory)
            if kind:
                labelled[kind] = memory.id
            at += timedelta(minutes=rng.randint(1, 6))
            is_question = text.rstrip().endswith(("?", "？"))
            if lang == "en":
                reply = rng.choice(EN_ANSWER if is_question else EN_REPLIES)
            else:
                reply = rng.choice(ZH_ANSWER if is_question else ZH_REPLIES)
            memories.append(Memory(f"{name}-s{session + 1:02d}-m{len(memories):03d}", name, session + 1,
                                   at.isoformat(), "assistant", reply))
            at += timedelta(minutes=rng.randint(1, 6))

    queries: list[dict[str, Any]] = []
    asked_at = (session_start[-1] + timedelta(days=2)).isoformat()
    for fact, lang, index in plan:
        ask_lang = "zh" if lang == "en" else "en"
        side = fact.zh if ask_lang == "zh" else fact.en
        values = _values(fact, index, ask_lang, rng)
        asks = [(ask_lang, "paraphrase", t) for t in side.ask] + [(ask_lang, "keyword", t) for t in side.keyword]
        # A control: the first question in the fact's own language, to see that recall across
        # languages does not cost the same-language question its answer (other-language near
        # misses now compete).
        asks.append((lang, "same_language", (fact.en if lang == "en" else fact.zh).ask[0]))
        for q_lang, kind, template in asks:
            queries.append({"id": f"{name}-q{len(queries):02d}", "conversation": name, "lang": q_lang,
                            "fact_lang": lang, "type": kind, "fact": fact.kind,
                            "text": template.format(**(values if q_lang == ask_lang else _values(fact, index, lang, rng))),
                            "relevant": [labelled[fact.kind]], "asked_at": asked_at})
    return memories, queries


def generate() -> dict[str, Any]:
    rng = random.Random(SEED)
    memories: list[Memory] = []
    queries: list[dict[str, Any]] = []
    for number in range(1, USERS + 1):
        m, q = _user(number, rng)
        memories += m
        queries += q
    return {
        "about": "Cross-lingual labelled long-term recall set X, generated by bench/ltm_recall_data_x.py "
                 "(deterministic). One scope per bilingual user; every query but the same_language controls is in "
                 "the other language than the fact it targets (lang: the query's, fact_lang: the fact's). x-01..x-06 tuning, "
                 "x-07..x-12 held out. Same memory shape as recall_set.json.",
        "memories": [m.__dict__ for m in memories],
        "queries": queries,
    }


def main() -> None:
    write(generate(), OUT)


if __name__ == "__main__":
    main()
