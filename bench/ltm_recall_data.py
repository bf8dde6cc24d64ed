"""Generate the labelled long-term recall set: `python -m bench.ltm_recall_data` writes
bench/data/ltm_recall/recall_set.json (committed; the generator is deterministic).

What it models: twelve users (six writing English, six Chinese), each one multi-session
conversation with an assistant (ten sessions over several months). Every message is one stored
memory. Planted in the chatter are facts about the user (hand-written templates with per-user
values), near-miss distractors (the same topics about other people, or general questions that
share the words) and small talk. The queries ask about the facts in other words than the
memory uses (paraphrases), need two memories (multi-hop), ask for the current value of a
changed preference (only the newer memory is right), ask when something happened (temporal),
or are small talk that needs no memory (no relevant ids; scored separately).

Relevance labels are the ids of the memories that answer the query. Everything below was
written for this project; nothing is fetched.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set.json"
SESSIONS = 10
SEED = 20261123


@dataclass
class Fact:
    """One fact kind. `say` are the user's ways to state it (first session it appears in),
    `later` (optional) the change stated in a later session; `ask` the paraphrased questions
    about the current value, `ask_before` questions about the old value (changed facts),
    `when` temporal questions. `hop`: a second statement that a multi-hop question needs."""

    kind: str
    values: list[dict[str, str]]
    say: list[str]
    ask: list[str]
    later: list[str] = field(default_factory=list)
    ask_before: list[str] = field(default_factory=list)
    when: list[str] = field(default_factory=list)
    hop: list[str] = field(default_factory=list)
    ask_hop: list[str] = field(default_factory=list)
    distract: list[str] = field(default_factory=list)


EN_FACTS = [
    Fact(
        "drink",
        [{"old": "green tea", "new": "black coffee"}, {"old": "oolong tea", "new": "a flat white"},
         {"old": "jasmine tea", "new": "espresso"}, {"old": "chai", "new": "cold brew coffee"},
         {"old": "earl grey", "new": "a cortado"}, {"old": "matcha", "new": "americano"}],
        say=["I start every morning with a big mug of {old}, it's my ritual."],
        later=["Update on my mornings: I dropped {old} and now it's {new} every day, the {old} stopped doing anything for me."],
        ask=["What beverage do I wake myself up with these days?", "If you were to bring me a hot drink at breakfast, what should it be now?"],
        ask_before=["What did I use to have at breakfast before my current habit?"],
        distract=["My colleague keeps offering me {new_other}, but it's not for me.",
                  "How much caffeine is there in a typical cup of {old_other}?"],
    ),
    Fact(
        "allergy",
        [{"x": "peanuts"}, {"x": "shellfish"}, {"x": "sesame"}, {"x": "tree nuts"}, {"x": "eggs"}, {"x": "soy"}],
        say=["Just so you know, I react badly to {x}; I carry an EpiPen because of it."],
        ask=["Is there any ingredient I must never eat?", "Which food could send me to the hospital?"],
        distract=["My nephew can't have {x_other} at school parties."],
    ),
    Fact(
        "pet",
        [{"pet": "cat", "name": "Mochi"}, {"pet": "dog", "name": "Biscuit"}, {"pet": "rabbit", "name": "Clover"},
         {"pet": "parrot", "name": "Kiwi"}, {"pet": "dog", "name": "Pepper"}, {"pet": "cat", "name": "Sushi"}],
        say=["We adopted a {pet} last week, we named it {name}!"],
        hop=["{name} has a vet checkup booked for the 14th, poor thing hates the carrier."],
        ask=["What is the name of my animal companion?", "What kind of animal lives with me?"],
        ask_hop=["When does my {pet} need to see the animal doctor?"],
        distract=["My neighbour's {pet_other} keeps barking at night.", "What's the average lifespan of a {pet_other}?"],
    ),
    Fact(
        "sibling",
        [{"rel": "sister", "name": "Anna", "city": "Lisbon", "kid": "son", "kname": "Leo", "inst": "cello"},
         {"rel": "brother", "name": "Marco", "city": "Toronto", "kid": "daughter", "kname": "Ivy", "inst": "violin"},
         {"rel": "sister", "name": "Priya", "city": "Melbourne", "kid": "daughter", "kname": "Zoe", "inst": "trumpet"},
         {"rel": "brother", "name": "Tom", "city": "Dublin", "kid": "son", "kname": "Finn", "inst": "drums"},
         {"rel": "sister", "name": "Lena", "city": "Vienna", "kid": "son", "kname": "Max", "inst": "flute"},
         {"rel": "brother", "name": "Sam", "city": "Oslo", "kid": "daughter", "kname": "Ella", "inst": "saxophone"}],
        say=["My {rel} {name} finally settled in {city} and loves it there."],
        hop=["{name}'s {kid} {kname} just started {inst} lessons and practises every evening."],
        ask=["Where does my {rel} live nowadays?", "Which city did my sibling {name} relocate to?"],
        ask_hop=["What instrument is my {rel}'s child learning?", "Which instrument does the kid of my sibling in {city} play?"],
        distract=["A friend of mine just moved to {city_other} for work.", "What's the weather usually like in {city_other} in winter?"],
    ),
    Fact(
        "job",
        [{"old": "a high school chemistry teacher", "new": "a data analyst at an insurance firm"},
         {"old": "a nurse in the ER", "new": "a clinical researcher"},
         {"old": "a bank teller", "new": "a UX designer at a startup"},
         {"old": "a line cook", "new": "the owner of a small bakery"},
         {"old": "a junior accountant", "new": "a product manager"},
         {"old": "a journalist", "new": "a speechwriter for the city council"}],
        say=["I've worked as {old} for six years now, long hours but I like it."],
        later=["Big news: I quit being {old}, starting Monday I'm {new}!"],
        ask=["What is my current occupation?", "What do I do for a living at the moment?"],
        ask_before=["What was my previous career?"],
        distract=["My cousin is thinking about becoming {new_other}.", "What skills does {old_other} need?"],
    ),
    Fact(
        "home",
        [{"old": "Chicago", "new": "Denver"}, {"old": "Leeds", "new": "Bristol"}, {"old": "Austin", "new": "Seattle"},
         {"old": "Boston", "new": "Portland"}, {"old": "Manchester", "new": "Edinburgh"}, {"old": "Phoenix", "new": "San Diego"}],
        say=["Winters in {old} are brutal, I've lived here since college."],
        later=["The movers came yesterday: we officially left {old} and now live in {new}."],
        ask=["Which city is my home at present?", "Where am I based these days?"],
        ask_before=["Which city did I live in before the move?"],
        distract=["Is {new_other} expensive to live in?"],
    ),
    Fact(
        "hobby",
        [{"x": "rock climbing"}, {"x": "pottery"}, {"x": "salsa dancing"}, {"x": "birdwatching"},
         {"x": "sourdough baking"}, {"x": "kayaking"}],
        say=["Signed up for a {x} class on Thursdays, first session was so much fun."],
        ask=["What activity do I do on Thursday evenings?", "What new pastime did I pick up?"],
        distract=["My partner thinks {x_other} is boring.", "Can you recommend gear for beginners in {x_other}?"],
    ),
    Fact(
        "trip",
        [{"city": "Kyoto", "what": "the temples"}, {"city": "Reykjavik", "what": "the northern lights"},
         {"city": "Marrakesh", "what": "the souks"}, {"city": "Cusco", "what": "the mountains"},
         {"city": "Hanoi", "what": "the street food"}, {"city": "Istanbul", "what": "the bazaars"}],
        say=["Just got back from {city}, {what} were unforgettable."],
        ask=["Which place did I visit on my last holiday?"],
        when=["When did I travel to {city}?", "How long ago was my holiday in {city}?"],
        distract=["Should I visit {city_other} in spring or autumn?"],
    ),
    Fact(
        "diet",
        [{"x": "vegetarian"}, {"x": "vegan"}, {"x": "pescatarian"}, {"x": "gluten-free"}, {"x": "keto"}, {"x": "dairy-free"}],
        say=["Since January I have gone {x}, feeling a lot better."],
        ask=["Are there eating restrictions I follow?", "What should you keep in mind when suggesting a dinner recipe for me?"],
        distract=["My roommate tried going {x_other} but gave up after a week."],
    ),
    Fact(
        "partner",
        [{"name": "Julia", "date": "June 12"}, {"name": "Ben", "date": "September 3"}, {"name": "Sofia", "date": "March 28"},
         {"name": "Daniel", "date": "October 19"}, {"name": "Mei", "date": "July 7"}, {"name": "Omar", "date": "December 1"}],
        say=["{name} and I got married on {date}, six years ago now."],
        ask=["What is my spouse called?", "On what day do I celebrate my wedding anniversary?"],
        distract=["My friend's wedding is on {date_other}, I need a gift."],
    ),
    Fact(
        "commute",
        [{"old": "drive", "new": "cycle"}, {"old": "take the bus", "new": "walk"}, {"old": "drive", "new": "take the train"},
         {"old": "take the subway", "new": "ride an e-scooter"}, {"old": "carpool", "new": "cycle"}, {"old": "take the bus", "new": "drive"}],
        say=["I {old} to the office every day, about forty minutes each way."],
        later=["New routine: I stopped needing to {old}, I {new} to work now and it's great."],
        ask=["How do I get to work these days?"],
        ask_before=["How did I use to commute?"],
        distract=["Is it safer to {new_other} or {old_other} in a big city?"],
    ),
    Fact(
        "appointment",
        [{"what": "dentist", "day": "Tuesday", "time": "3pm"}, {"what": "eye exam", "day": "Friday", "time": "10am"},
         {"what": "physiotherapy", "day": "Monday", "time": "6pm"}, {"what": "haircut", "day": "Saturday", "time": "11am"},
         {"what": "car service", "day": "Wednesday", "time": "8am"}, {"what": "tax advisor", "day": "Thursday", "time": "2pm"}],
        say=["Remind me that my {what} appointment is next {day} at {time}."],
        ask=["What is on my calendar for next {day}?", "At what time is my {what} booked?"],
        distract=["What does a typical {what_other} appointment cost?"],
    ),
    Fact(
        "language",
        [{"x": "Japanese"}, {"x": "Italian"}, {"x": "Korean"}, {"x": "Portuguese"}, {"x": "German"}, {"x": "Arabic"}],
        say=["Started an evening {x} course, the grammar is melting my brain."],
        ask=["Which foreign tongue am I studying?"],
        distract=["My boss is fluent in {x_other}."],
    ),
    Fact(
        "book",
        [{"x": "Ursula K. Le Guin"}, {"x": "Haruki Murakami"}, {"x": "Toni Morrison"}, {"x": "Terry Pratchett"},
         {"x": "Agatha Christie"}, {"x": "Ted Chiang"}],
        say=["Nobody writes like {x}, I've reread all of their novels twice."],
        ask=["Who is my favourite writer?", "Whose novels do I keep going back to?"],
        distract=["My book club picked something by {x_other} this month, not my taste."],
    ),
]

ZH_FACTS = [
    Fact(
        "drink",
        [{"old": "绿茶", "new": "美式咖啡"}, {"old": "普洱", "new": "拿铁"}, {"old": "乌龙茶", "new": "手冲咖啡"},
         {"old": "菊花茶", "new": "冷萃咖啡"}, {"old": "红茶", "new": "卡布奇诺"}, {"old": "茉莉花茶", "new": "浓缩咖啡"}],
        say=["我每天早上都要泡一大杯{old}，这是我的习惯。"],
        later=["跟你说一下，我最近不喝{old}了，现在每天早上改成{new}，{old}对我已经没什么用了。"],
        ask=["我现在早上靠什么提神？", "早餐时给我端一杯热饮的话，现在该准备哪种？"],
        ask_before=["我以前早饭时习惯喝的是什么？"],
        distract=["同事老是请我喝{new_other}，可我不太喜欢。", "一杯{old_other}里大概有多少咖啡因？"],
    ),
    Fact(
        "allergy",
        [{"x": "花生"}, {"x": "海鲜"}, {"x": "芒果"}, {"x": "芝麻"}, {"x": "鸡蛋"}, {"x": "牛奶"}],
        say=["提醒一下，我对{x}过敏，一碰就起疹子，出门都带着药。"],
        ask=["有什么食材是我绝对不能碰的？", "哪种食物可能让我进医院？"],
        distract=["我侄子在学校聚餐时不能吃{x_other}。"],
    ),
    Fact(
        "pet",
        [{"pet": "猫", "name": "团子"}, {"pet": "狗", "name": "旺财"}, {"pet": "兔子", "name": "雪球"},
         {"pet": "鹦鹉", "name": "豆豆"}, {"pet": "狗", "name": "可乐"}, {"pet": "猫", "name": "橘子"}],
        say=["我们上周领养了一只{pet}，给它起名叫{name}！"],
        hop=["{name}这个月十四号要去做体检，它最怕进航空箱了。"],
        ask=["我家那个小家伙叫什么名字？", "我养的是什么动物？"],
        ask_hop=["我家的{pet}什么时候要去看兽医？"],
        distract=["邻居家的{pet_other}晚上老是叫。", "{pet_other}一般能活多少年？"],
    ),
    Fact(
        "sibling",
        [{"rel": "姐姐", "name": "小雯", "city": "成都", "kid": "儿子", "kname": "乐乐", "inst": "大提琴"},
         {"rel": "哥哥", "name": "志强", "city": "青岛", "kid": "女儿", "kname": "朵朵", "inst": "小提琴"},
         {"rel": "妹妹", "name": "婷婷", "city": "厦门", "kid": "女儿", "kname": "悠悠", "inst": "古筝"},
         {"rel": "弟弟", "name": "阿杰", "city": "西安", "kid": "儿子", "kname": "豆丁", "inst": "架子鼓"},
         {"rel": "姐姐", "name": "丽丽", "city": "昆明", "kid": "儿子", "kname": "小宝", "inst": "长笛"},
         {"rel": "哥哥", "name": "大伟", "city": "大连", "kid": "女儿", "kname": "甜甜", "inst": "琵琶"}],
        say=["我{rel}{name}终于在{city}定居了，说那边生活很舒服。"],
        hop=["{name}的{kid}{kname}刚开始学{inst}，每天晚上都练。"],
        ask=["我{rel}现在住在哪里？", "我的兄弟姐妹{name}搬去了哪个城市？"],
        ask_hop=["我{rel}家的孩子在学什么乐器？", "住在{city}的那位亲戚，家里小孩学的是哪种乐器？"],
        distract=["我一个朋友刚因为工作搬到了{city_other}。", "{city_other}冬天一般冷不冷？"],
    ),
    Fact(
        "job",
        [{"old": "中学化学老师", "new": "保险公司的数据分析师"}, {"old": "急诊科护士", "new": "临床研究员"},
         {"old": "银行柜员", "new": "创业公司的交互设计师"}, {"old": "餐厅厨师", "new": "一家小面包店的老板"},
         {"old": "初级会计", "new": "产品经理"}, {"old": "报社记者", "new": "市政府的撰稿人"}],
        say=["我当{old}已经六年了，虽然辛苦但挺喜欢的。"],
        later=["告诉你个大消息：我辞掉了{old}的工作，下周一开始当{new}！"],
        ask=["我目前从事什么职业？", "我现在靠什么谋生？"],
        ask_before=["我之前是做什么工作的？"],
        distract=["我表弟在考虑去当{new_other}。", "做{old_other}需要什么技能？"],
    ),
    Fact(
        "home",
        [{"old": "北京", "new": "杭州"}, {"old": "上海", "new": "苏州"}, {"old": "广州", "new": "深圳"},
         {"old": "武汉", "new": "长沙"}, {"old": "南京", "new": "合肥"}, {"old": "天津", "new": "青岛"}],
        say=["{old}的冬天真难熬，我从大学起就一直住这儿。"],
        later=["搬家公司昨天来过了：我们正式离开{old}，现在住在{new}了。"],
        ask=["我现在定居在哪座城市？", "我目前人在哪儿生活？"],
        ask_before=["搬家之前我住在哪个城市？"],
        distract=["{new_other}的房租贵不贵？"],
    ),
    Fact(
        "hobby",
        [{"x": "攀岩"}, {"x": "陶艺"}, {"x": "拉丁舞"}, {"x": "观鸟"}, {"x": "烘焙"}, {"x": "皮划艇"}],
        say=["我报了个每周四的{x}班，第一节课就玩得特别开心。"],
        ask=["我周四晚上一般去干什么？", "我最近培养了什么新的消遣？"],
        distract=["我对象觉得{x_other}很无聊。", "刚入门{x_other}需要买哪些装备？"],
    ),
    Fact(
        "trip",
        [{"city": "京都", "what": "寺庙"}, {"city": "冰岛", "what": "极光"}, {"city": "大理", "what": "洱海"},
         {"city": "敦煌", "what": "莫高窟"}, {"city": "清迈", "what": "夜市"}, {"city": "伊斯坦布尔", "what": "大巴扎"}],
        say=["刚从{city}回来，那里的{what}让我终生难忘。"],
        ask=["我上次度假去了哪里？"],
        when=["我是什么时候去的{city}？", "我去{city}玩是多久以前的事？"],
        distract=["去{city_other}是春天好还是秋天好？"],
    ),
    Fact(
        "diet",
        [{"x": "吃素"}, {"x": "纯素饮食"}, {"x": "只吃鱼不吃肉"}, {"x": "无麸质饮食"}, {"x": "生酮饮食"}, {"x": "不吃乳制品"}],
        say=["从一月份开始我就{x}了，感觉身体好多了。"],
        ask=["我在饮食上有什么忌口吗？", "给我推荐晚饭菜谱时要注意什么？"],
        distract=["我室友试过{x_other}，一周就放弃了。"],
    ),
    Fact(
        "partner",
        [{"name": "晓琳", "date": "六月十二日"}, {"name": "建华", "date": "九月三日"}, {"name": "雨桐", "date": "三月二十八日"},
         {"name": "浩然", "date": "十月十九日"}, {"name": "思琪", "date": "七月七日"}, {"name": "子轩", "date": "十二月一日"}],
        say=["我和{name}是{date}结的婚，到现在已经六年了。"],
        ask=["我爱人叫什么？", "我的结婚纪念日是哪一天？"],
        distract=["我朋友的婚礼定在{date_other}，我得准备份礼物。"],
    ),
    Fact(
        "commute",
        [{"old": "开车", "new": "骑自行车"}, {"old": "坐公交", "new": "走路"}, {"old": "开车", "new": "坐高铁"},
         {"old": "坐地铁", "new": "骑电动车"}, {"old": "拼车", "new": "骑自行车"}, {"old": "坐公交", "new": "开车"}],
        say=["我每天{old}去公司，单程差不多四十分钟。"],
        later=["新习惯：我不再{old}了，现在{new}上班，感觉很好。"],
        ask=["我现在怎么去单位？"],
        ask_before=["我以前是怎么通勤的？"],
        distract=["在大城市里{new_other}和{old_other}哪个更安全？"],
    ),
    Fact(
        "appointment",
        [{"what": "牙医", "day": "周二", "time": "下午三点"}, {"what": "眼科检查", "day": "周五", "time": "上午十点"},
         {"what": "理疗", "day": "周一", "time": "晚上六点"}, {"what": "理发", "day": "周六", "time": "上午十一点"},
         {"what": "汽车保养", "day": "周三", "time": "早上八点"}, {"what": "税务咨询", "day": "周四", "time": "下午两点"}],
        say=["帮我记一下，下{day}{time}约了{what}。"],
        ask=["我下{day}的日程上有什么安排？", "我的{what}约在几点？"],
        distract=["做一次{what_other}一般要多少钱？"],
    ),
    Fact(
        "language",
        [{"x": "日语"}, {"x": "意大利语"}, {"x": "韩语"}, {"x": "葡萄牙语"}, {"x": "德语"}, {"x": "西班牙语"}],
        say=["我报了个晚上的{x}课，语法快把我搞晕了。"],
        ask=["我正在学哪门外语？"],
        distract=["我老板{x_other}说得很流利。"],
    ),
    Fact(
        "book",
        [{"x": "金庸"}, {"x": "余华"}, {"x": "刘慈欣"}, {"x": "村上春树"}, {"x": "张爱玲"}, {"x": "东野圭吾"}],
        say=["没人写得过{x}，他的小说我全都重读过两遍。"],
        ask=["我最喜欢哪位作家？", "我反复重读的是谁的小说？"],
        distract=["我们读书会这个月选了{x_other}的书，不太合我胃口。"],
    ),
]

EN_REPLIES = ["Got it, I'll keep that in mind.", "That sounds wonderful!", "Thanks for telling me.", "Noted!",
              "Oh nice, how exciting.", "I'll remember that.", "Good to know.", "Sounds like a big change!",
              "That's great to hear.", "Understood."]
ZH_REPLIES = ["好的，我记住了。", "听起来很棒！", "谢谢你告诉我。", "收到！", "哇，真不错。", "我会记下来的。",
              "了解了。", "这变化挺大的！", "听到这个真开心。", "明白。"]

EN_SMALL_TALK = ["hi!", "good morning", "thanks, that helps", "haha nice", "ok cool", "see you tomorrow", "hello again",
                 "lol", "thank you so much", "good night"]
ZH_SMALL_TALK = ["你好呀", "早上好", "谢谢，很有帮助", "哈哈不错", "好的", "明天见", "又见面啦", "哈哈哈", "太感谢了", "晚安"]

EN_TOPICS = ["photosynthesis", "compound interest", "black holes", "the French Revolution", "machine learning",
             "inflation", "the water cycle", "quantum computing", "jet lag", "blockchains", "vaccines", "tides",
             "the stock market", "climate change", "plate tectonics", "the immune system", "supply chains",
             "electric cars", "the Roman empire", "sleep cycles", "how bridges stay up", "DNA", "rainbows",
             "the Olympic games", "coral reefs", "solar panels", "volcanoes", "the printing press", "memory foam",
             "noise-cancelling headphones"]
EN_ASKS = ["Can you explain {t} in simple terms?", "Give me three fun facts about {t}.",
           "What's a common misconception about {t}?", "Write a two-line poem about {t}."]
EN_TASKS = ["writing a cover letter", "fixing a squeaky door", "removing a coffee stain", "planning a birthday party",
            "negotiating a salary", "cleaning a cast iron pan", "falling asleep faster", "packing light",
            "learning to type faster", "keeping houseplants alive", "saving on groceries", "public speaking"]
ZH_TOPICS = ["光合作用", "复利", "黑洞", "工业革命", "机器学习", "通货膨胀", "水循环", "量子计算", "倒时差", "区块链",
             "疫苗", "潮汐", "股市", "气候变化", "板块运动", "免疫系统", "供应链", "电动车", "秦朝", "睡眠周期",
             "桥梁结构", "基因", "彩虹", "奥运会", "珊瑚礁", "太阳能板", "火山", "活字印刷", "记忆棉", "降噪耳机"]
ZH_ASKS = ["能用简单的话解释一下{t}吗？", "给我讲三个关于{t}的冷知识。", "关于{t}有什么常见误解？", "写两句关于{t}的小诗。"]
ZH_TASKS = ["写求职信", "修理吱吱响的门", "去除衣服上的咖啡渍", "筹备生日聚会", "谈薪水", "保养铸铁锅", "快速入睡",
            "轻装出行", "提高打字速度", "养活室内绿植", "节省买菜钱", "当众演讲"]
EN_TIP = "Any tips for {t}?"
ZH_TIP = "有没有关于{t}的小技巧？"
EN_ANSWER = ["Sure! Here's a short overview.", "Great question, here's the gist.", "Happy to help with that.",
             "Here are a few pointers.", "Let me break it down for you."]
ZH_ANSWER = ["当然！简单说一下。", "好问题，要点如下。", "很乐意帮忙。", "给你几点建议。", "我来给你拆解一下。"]

EN_NAMES = ["alex", "blake", "casey", "devon", "emery", "frankie"]
ZH_NAMES = ["wang_fang", "li_na", "zhang_wei", "liu_yang", "chen_jing", "zhao_lei"]


@dataclass
class Memory:
    id: str
    conversation: str
    session: int
    at: str
    role: str
    text: str


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def _others(fact: Fact, index: int, rng: random.Random) -> dict[str, str]:
    """`{key_other}` values: the same slots taken from another user's values (near misses)."""
    other = fact.values[(index + 1 + rng.randrange(len(fact.values) - 1)) % len(fact.values)]
    return {f"{k}_other": v for k, v in other.items()}


@dataclass(frozen=True)
class Vocabulary:
    """What one language's conversations are made of."""

    facts: list[Fact]
    replies: list[str]  # the assistant's answer to a statement
    answers: list[str]  # the assistant's answer to a question
    small_talk: list[str]
    topics: list[str]
    asks: list[str]  # general questions, "{t}" a topic
    tasks: list[str]
    tip: str  # a request for tips, "{t}" a task
    chatter_asks: int = 46
    chatter_tips: int = 8


def _conversation(name: str, lang: str, user_index: int, rng: random.Random,
                  vocabulary: Vocabulary | None = None) -> tuple[list[Memory], list[dict[str, Any]]]:
    v = vocabulary or (EN if lang == "en" else ZH)
    facts = v.facts
    start = datetime(2025, 1, 6, 9, tzinfo=UTC) + timedelta(days=7 * user_index)
    session_start = [start]
    for _ in range(SESSIONS - 1):
        session_start.append(session_start[-1] + timedelta(days=rng.randint(6, 20), hours=rng.randint(-3, 8)))

    # Per session, the lines the user says (text, key) in order; key names a labelled statement.
    lines: list[list[tuple[str, str | None]]] = [[] for _ in range(SESSIONS)]
    plan: list[tuple[Fact, dict[str, str]]] = []
    for fact in facts:
        index = (user_index + facts.index(fact)) % len(fact.values)
        values = {**fact.values[index], **_others(fact, index, rng)}
        plan.append((fact, values))
        first = rng.randrange(0, 4) if fact.later else rng.randrange(0, SESSIONS - 1)
        lines[first].append((_fill(rng.choice(fact.say), values), f"{fact.kind}:say"))
        if fact.later:
            lines[rng.randrange(6, SESSIONS)].append((_fill(rng.choice(fact.later), values), f"{fact.kind}:later"))
        if fact.hop:
            lines[rng.randrange(first + 1, SESSIONS)].append((_fill(rng.choice(fact.hop), values), f"{fact.kind}:hop"))
        for template in fact.distract:
            lines[rng.randrange(SESSIONS)].append((_fill(template, values), None))

    # Chatter: general questions, tips and small talk, each used once per user.
    asks = [a.format(t=t) for t in v.topics for a in v.asks]
    tips = [v.tip.format(t=t) for t in v.tasks]
    small = v.small_talk
    chatter = rng.sample(asks, v.chatter_asks) + rng.sample(tips, v.chatter_tips) + list(small)
    rng.shuffle(chatter)
    for i, text in enumerate(chatter):
        lines[i % SESSIONS].append((text, None))

    memories: list[Memory] = []
    labelled: dict[str, str] = {}
    answers, replies = v.answers, v.replies
    for session, session_lines in enumerate(lines):
        rng.shuffle(session_lines)
        at = session_start[session]
        for text, key in session_lines:
            memory = Memory(f"{name}-s{session + 1:02d}-m{len(memories):03d}", name, session + 1,
                            at.isoformat(), "user", text)
            memories.append(memory)
            if key:
                labelled[key] = memory.id
            at += timedelta(minutes=rng.randint(1, 6))
            is_question = text.rstrip().endswith(("?", "？"))
            reply = rng.choice(answers) if is_question else rng.choice(replies)
            # Replies repeat across a conversation; a stored reply is one memory per message.
            memories.append(Memory(f"{name}-s{session + 1:02d}-m{len(memories):03d}", name, session + 1,
                                   at.isoformat(), "assistant", reply))
            at += timedelta(minutes=rng.randint(1, 6))

    queries: list[dict[str, Any]] = []
    asked_at = (session_start[-1] + timedelta(days=3)).isoformat()

    def add(kind: str, text: str, relevant: list[str]) -> None:
        queries.append({"id": f"{name}-q{len(queries):02d}", "conversation": name, "lang": lang, "type": kind,
                        "text": text, "relevant": relevant, "asked_at": asked_at})

    for fact, values in plan:
        current = labelled[f"{fact.kind}:later"] if fact.later else labelled[f"{fact.kind}:say"]
        for template in fact.ask:
            add("changed_preference" if fact.later else "paraphrase", _fill(template, values), [current])
        for template in fact.ask_before:
            # The change statement names the old value too, so both answer it.
            add("previous_value", _fill(template, values), [labelled[f"{fact.kind}:say"], labelled[f"{fact.kind}:later"]])
        for template in fact.when:
            add("temporal", _fill(template, values), [labelled[f"{fact.kind}:say"]])
        for template in fact.ask_hop:
            add("multi_hop", _fill(template, values), [labelled[f"{fact.kind}:say"], labelled[f"{fact.kind}:hop"]])
    for text in rng.sample(small, 3):
        add("small_talk", text, [])
    return memories, queries


EN = Vocabulary(EN_FACTS, EN_REPLIES, EN_ANSWER, EN_SMALL_TALK, EN_TOPICS, EN_ASKS, EN_TASKS, EN_TIP)
ZH = Vocabulary(ZH_FACTS, ZH_REPLIES, ZH_ANSWER, ZH_SMALL_TALK, ZH_TOPICS, ZH_ASKS, ZH_TASKS, ZH_TIP)


def generate() -> dict[str, Any]:
    rng = random.Random(SEED)
    memories: list[Memory] = []
    queries: list[dict[str, Any]] = []
    for i, name in enumerate(EN_NAMES):
        m, q = _conversation(f"en-{name}", "en", i, rng)
        memories += m
        queries += q
    for i, name in enumerate(ZH_NAMES):
        m, q = _conversation(f"zh-{name}", "zh", i, rng)
        memories += m
        queries += q
    return {
        "about": "Labelled long-term recall set, generated by bench/ltm_recall_data.py (deterministic). "
                 "One conversation per user; every message is a memory; relevant lists the memory ids that "
                 "answer a query (empty for small talk).",
        "memories": [m.__dict__ for m in memories],
        "queries": queries,
    }


def write(data: dict[str, Any], out: Path) -> None:
    """Write a generated set and print what it holds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n")
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[f"{q['lang']}:{q['type']}"] = kinds.get(f"{q['lang']}:{q['type']}", 0) + 1
    print(f"{len(data['memories'])} memories, {len(data['queries'])} queries -> {out}")
    print(json.dumps(kinds, indent=1, sort_keys=True))


def main() -> None:
    write(generate(), OUT)


if __name__ == "__main__":
    main()
