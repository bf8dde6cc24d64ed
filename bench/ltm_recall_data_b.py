"""Generate the second labelled recall set, set B: `python -m bench.ltm_recall_data_b` writes
bench/data/ltm_recall/recall_set_b.json (committed; deterministic).

Set A (bench/ltm_recall_data.py) is the one the ranking defaults and the offline scorer's cues
were looked at against. Set B was written afterwards, with other fact kinds, other phrasings
(several per fact, picked at random), other chatter and replies, and eight users (four English,
four Chinese); it was measured once and not tuned on, so it stands for data the engine has not
seen. Same shape and query types as set A.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bench.ltm_recall_data import Fact, Memory, Vocabulary, _conversation, write

OUT = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set_b.json"
SEED = 20261126

EN_FACTS = [
    Fact(
        "car",
        [{"old": "an old Corolla", "new": "a Tesla Model 3"}, {"old": "a Honda Civic", "new": "a Volvo estate"},
         {"old": "a Mini Cooper", "new": "a Kia EV6"}, {"old": "a Ford Focus", "new": "a Subaru Outback"}],
        say=["My daily ride is {old}, it has never let me down.", "Still driving {old}, it's done 200,000 miles."],
        later=["Traded in {old} over the weekend, I'm now driving {new}.",
               "Finally said goodbye to {old}; {new} is parked outside now."],
        ask=["What car do I drive at the moment?", "Which vehicle is mine now?"],
        ask_before=["What did I drive before my current car?"],
        distract=["My neighbour just bought {new_other} and won't stop talking about it.",
                  "Is {old_other} reliable as a used car?"],
    ),
    Fact(
        "condition",
        [{"x": "asthma"}, {"x": "type 1 diabetes"}, {"x": "migraines"}, {"x": "a bad lower back"}],
        say=["My doctor confirmed I have {x}, so I need to pace myself.",
             "Living with {x} means I plan my days around it."],
        ask=["Is there a health issue I deal with?", "What medical condition should you keep in mind for me?"],
        distract=["My aunt has struggled with {x_other} for years.", "What are common treatments for {x_other}?"],
    ),
    Fact(
        "child",
        [{"name": "Nora", "age": "seven", "role": "the narrator"}, {"name": "Theo", "age": "five", "role": "a pirate"},
         {"name": "Maya", "age": "nine", "role": "the queen"}, {"name": "Eli", "age": "six", "role": "a tree"}],
        say=["Our little {name} turns {age} next month, we're planning a garden party.",
             "{name} is turning {age} soon and wants a dinosaur cake."],
        hop=["{name} got a part in the school play, {role}, and rehearses every afternoon."],
        ask=["What is my kid called?", "How old is my child about to be?"],
        ask_hop=["Which role does my kid have in the school play?"],
        distract=["A coworker's son, {name_other}, just started kindergarten."],
    ),
    Fact(
        "team",
        [{"x": "Arsenal"}, {"x": "the Chicago Cubs"}, {"x": "the Boston Celtics"}, {"x": "Real Madrid"}],
        say=["Been a {x} supporter since I was a kid, I never miss a match.",
             "Match nights are sacred at my place: {x} all the way."],
        ask=["Which team do I root for?", "Who should I be cheering for this weekend?"],
        distract=["My brother-in-law can't stand {x_other}.", "How did {x_other} do last season?"],
    ),
    Fact(
        "exercise",
        [{"old": "running 5k every morning", "new": "swimming laps at lunch"},
         {"old": "heavy lifting at the gym", "new": "yoga twice a week"},
         {"old": "playing squash", "new": "long-distance cycling"},
         {"old": "spinning classes", "new": "trail hiking on weekends"}],
        say=["My way of staying sane is {old}.", "Nothing clears my head like {old}."],
        later=["My knee gave up, so I swapped {old} for {new}.", "Doctor's orders: no more {old}, it's {new} for me now."],
        ask=["How do I keep fit these days?", "What is my workout routine now?"],
        ask_before=["What exercise did I do before I changed routines?"],
        distract=["My partner keeps trying to get me into {new_other}.", "Is {old_other} bad for the joints?"],
    ),
    Fact(
        "project",
        [{"x": "billing system"}, {"x": "mobile app redesign"}, {"x": "data warehouse"}, {"x": "customer portal"}],
        say=["At work I'm leading the {x} overhaul, the deadline is the end of March.",
             "I've been put in charge of the {x} project, big responsibility."],
        ask=["What am I responsible for at my job?", "Which project do I run at the office?"],
        distract=["Another team is handling the {x_other} rollout.", "How long does a typical {x_other} project take?"],
    ),
    Fact(
        "comfort_food",
        [{"x": "ramen"}, {"x": "mac and cheese"}, {"x": "chicken pho"}, {"x": "shakshuka"}],
        say=["Nothing beats a big bowl of {x} on a rainy evening.", "When I'm down, {x} fixes everything."],
        ask=["What do I like to eat when I need cheering up?", "What should you suggest for my dinner on a gloomy day?"],
        distract=["Is {x_other} actually healthy?", "My sister hates {x_other}."],
    ),
    Fact(
        "getaway",
        [{"city": "Lisbon", "what": "the custard tarts"}, {"city": "Prague", "what": "the old town"},
         {"city": "Vancouver", "what": "the seawall"}, {"city": "Seoul", "what": "the night markets"}],
        say=["We flew to {city} for the long weekend, {what} were amazing.",
             "Back home after four days in {city}; still dreaming about {what}."],
        ask=["Where did I spend my long weekend away?"],
        when=["When was I in {city}?"],
        distract=["Is {city_other} worth a visit in winter?"],
    ),
    Fact(
        "birthday",
        [{"date": "April 9"}, {"date": "November 22"}, {"date": "August 15"}, {"date": "February 2"}],
        say=["My birthday is on {date}; a quiet dinner would be perfect.",
             "Heads up, {date} is my birthday, and I hate surprise parties."],
        ask=["When is my birthday?", "What date should you remember to congratulate me on?"],
        distract=["My boss's birthday falls on {date_other}."],
    ),
]

ZH_FACTS = [
    Fact(
        "car",
        [{"old": "一辆老款卡罗拉", "new": "一辆比亚迪汉"}, {"old": "一辆二手思域", "new": "一辆理想L7"},
         {"old": "一辆白色帕萨特", "new": "一辆小鹏P7"}, {"old": "一辆老捷达", "new": "一辆特斯拉Model Y"}],
        say=["我平时开的是{old}，开了快十年了。", "家里就{old}，小毛病不少但还能跑。"],
        later=["周末把{old}卖了，现在开的是{new}。", "终于换车了：{old}处理掉了，楼下停的是{new}。"],
        ask=["我现在开什么车？", "我目前的座驾是哪辆？"],
        ask_before=["换车之前我开的是什么？"],
        distract=["邻居刚提了{new_other}，天天跟人炫耀。", "{old_other}当二手车买靠谱吗？"],
    ),
    Fact(
        "condition",
        [{"x": "哮喘"}, {"x": "糖尿病"}, {"x": "偏头痛"}, {"x": "腰椎间盘突出"}],
        say=["医生确诊我有{x}，所以平时得格外注意。", "因为{x}，我每天的安排都得迁就身体。"],
        ask=["我有什么健康方面的问题？", "给我安排活动时要顾及我的什么病？"],
        distract=["我姑妈被{x_other}折腾了好多年。", "{x_other}一般怎么治疗？"],
    ),
    Fact(
        "child",
        [{"name": "果果", "age": "七岁", "role": "旁白"}, {"name": "小宇", "age": "五岁", "role": "小海盗"},
         {"name": "安安", "age": "九岁", "role": "女王"}, {"name": "豆包", "age": "六岁", "role": "一棵树"}],
        say=["我家{name}下个月就满{age}了，打算在院子里办个生日会。", "{name}马上{age}了，吵着要恐龙蛋糕。"],
        hop=["{name}在学校话剧里演{role}，每天下午都在排练。"],
        ask=["我家孩子叫什么？", "我孩子快几岁了？"],
        ask_hop=["我家孩子在学校话剧里演什么角色？"],
        distract=["同事的儿子{name_other}刚上幼儿园。"],
    ),
    Fact(
        "team",
        [{"x": "广州队"}, {"x": "湖人队"}, {"x": "北京国安"}, {"x": "皇家马德里"}],
        say=["我从小就是{x}的球迷，每场比赛都不落下。", "比赛日在我家是大事：永远支持{x}。"],
        ask=["我支持哪支球队？", "这个周末我该为谁加油？"],
        distract=["我姐夫特别讨厌{x_other}。", "{x_other}上赛季成绩怎么样？"],
    ),
    Fact(
        "exercise",
        [{"old": "每天早上跑五公里", "new": "午休时去游泳"}, {"old": "去健身房练力量", "new": "一周两次瑜伽"},
         {"old": "打羽毛球", "new": "长途骑行"}, {"old": "上动感单车课", "new": "周末徒步"}],
        say=["我解压的方式就是{old}。", "没什么比{old}更让我放松了。"],
        later=["膝盖不行了，我把{old}换成了{new}。", "医生不让我再{old}了，现在改成{new}。"],
        ask=["我现在靠什么锻炼身体？", "我目前的运动习惯是什么？"],
        ask_before=["换运动之前我是怎么锻炼的？"],
        distract=["我对象一直想拉我去{new_other}。", "{old_other}伤不伤关节？"],
    ),
    Fact(
        "project",
        [{"x": "计费系统"}, {"x": "手机应用改版"}, {"x": "数据仓库"}, {"x": "客户门户网站"}],
        say=["公司让我牵头做{x}的重构，三月底就要交付。", "我现在负责{x}这个项目，压力不小。"],
        ask=["我在工作上负责什么？", "我在公司主导的是哪个项目？"],
        distract=["另一个组在做{x_other}的上线。", "一个{x_other}项目一般要做多久？"],
    ),
    Fact(
        "comfort_food",
        [{"x": "螺蛳粉"}, {"x": "番茄鸡蛋面"}, {"x": "麻辣烫"}, {"x": "小馄饨"}],
        say=["下雨天来一碗{x}，什么烦恼都没了。", "心情不好的时候，一碗{x}就能治好我。"],
        ask=["我心情低落时喜欢吃什么？", "阴雨天晚饭给我推荐什么好？"],
        distract=["{x_other}到底健不健康？", "我妹妹最受不了{x_other}的味道。"],
    ),
    Fact(
        "getaway",
        [{"city": "厦门", "what": "鼓浪屿"}, {"city": "西安", "what": "城墙"},
         {"city": "青岛", "what": "海边"}, {"city": "首尔", "what": "夜市"}],
        say=["小长假我们飞去了{city}，{what}太棒了。", "在{city}玩了四天刚到家，还在回味{what}。"],
        ask=["小长假我去哪儿玩了？"],
        when=["我是什么时候在{city}的？"],
        distract=["冬天去{city_other}值得吗？"],
    ),
    Fact(
        "birthday",
        [{"date": "四月九日"}, {"date": "十一月二十二日"}, {"date": "八月十五日"}, {"date": "二月二日"}],
        say=["我的生日是{date}，安安静静吃顿饭就好。", "先说好，{date}是我生日，我最怕惊喜派对。"],
        ask=["我的生日是哪天？", "哪天该记得祝我生日快乐？"],
        distract=["我老板的生日在{date_other}。"],
    ),
]

EN = Vocabulary(
    facts=EN_FACTS,
    replies=["Thanks for sharing that with me.", "Okay, that's useful to know.", "Wow, that's quite something.",
             "I'll keep it in mind next time.", "Makes sense.", "Love that for you!"],
    answers=["Here's what I'd suggest.", "Good one, let me explain.", "Short version below.",
             "There are a few ways to look at it."],
    small_talk=["hey", "morning!", "cheers", "nice one", "alright", "talk later", "back again", "ha, fair"],
    topics=["how vaccines work", "why the sky is blue", "how airplanes fly", "the history of tea", "how batteries age",
            "what causes earthquakes", "how credit scores work", "why cats purr", "how noise-cancelling works",
            "the origin of chess", "how coffee is decaffeinated", "why leaves change colour"],
    asks=["Quick question: {t}?", "Could you walk me through {t}?", "I always wondered about {t}."],
    tasks=["meal prepping", "decluttering a closet", "sleeping on a plane", "learning to juggle",
           "writing a toast", "choosing a mattress"],
    tip="What's the smartest way to approach {t}?",
    chatter_asks=30,
    chatter_tips=5,
)
ZH = Vocabulary(
    facts=ZH_FACTS,
    replies=["谢谢你跟我分享。", "好，这个挺有用的。", "哇，真厉害。", "下次我会考虑到的。", "有道理。", "替你开心！"],
    answers=["我的建议是这样的。", "好问题，我解释一下。", "简单来说如下。", "可以从几个角度来看。"],
    small_talk=["嘿", "早呀", "谢啦", "不错不错", "行吧", "回头聊", "我又来了", "哈，也对"],
    topics=["疫苗的原理", "天为什么是蓝的", "飞机怎么飞起来", "茶叶的历史", "电池为什么会老化", "地震是怎么产生的",
            "信用分怎么算", "猫为什么会打呼噜", "降噪是怎么实现的", "象棋的起源", "咖啡怎么去咖啡因", "树叶为什么会变色"],
    asks=["问个问题：{t}？", "能给我讲讲{t}吗？", "我一直很好奇{t}。"],
    tasks=["备餐", "整理衣柜", "在飞机上睡觉", "学抛接球", "写祝酒词", "挑床垫"],
    tip="{t}有什么聪明的办法？",
    chatter_asks=30,
    chatter_tips=5,
)
EN_NAMES = ["harper", "jordan", "morgan", "riley"]
ZH_NAMES = ["sun_li", "zhou_min", "wu_hao", "xu_qing"]


def generate() -> dict[str, Any]:
    rng = random.Random(SEED)
    memories: list[Memory] = []
    queries: list[dict[str, Any]] = []
    for lang, names, vocabulary in (("en", EN_NAMES, EN), ("zh", ZH_NAMES, ZH)):
        for i, name in enumerate(names):
            m, q = _conversation(f"b-{lang}-{name}", lang, i, rng, vocabulary)
            memories += m
            queries += q
    return {
        "about": "Labelled long-term recall set B, generated by bench/ltm_recall_data_b.py (deterministic), "
                 "written after the defaults were chosen and never tuned on. Same shape as recall_set.json.",
        "memories": [m.__dict__ for m in memories],
        "queries": queries,
    }


def main() -> None:
    write(generate(), OUT)


if __name__ == "__main__":
    main()
