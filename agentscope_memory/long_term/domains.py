"""The memory domains that importance scoring assigns and query routing selects, and the
deterministic cues the offline heuristics use to find them (English and Chinese).

The cue lists are this project's own: English patterns match word prefixes (so "hik" finds
hike, hiking, hiked), Chinese ones match substrings.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Domain = Literal[
    "general_chat",
    "user_preferences",
    "professional_and_academic",
    "lifestyle_and_interests",
    "social_and_relationships",
    "tasks_and_schedules",
]
DOMAINS: tuple[Domain, ...] = get_args(Domain)
GENERAL_CHAT: Domain = "general_chat"
# Where the offline heuristics put a question (the router) or a fact (the scorer) that matches no
# cue, alike: the domain most personal questions and facts are about. A fact filed as
# general_chat instead was hidden from every routed recall ("my birthday is May 3").
UNKNOWN_DOMAIN: Domain = "user_preferences"


def parse_domain(value: object) -> Domain | None:
    """A domain from loosely written text ("User Preferences", "user-preferences"), or None."""
    if not isinstance(value, str):
        return None
    key = re.sub(r"[\s\-]+", "_", value.strip().lower())
    for domain in DOMAINS:
        if key == domain:
            return domain
    return None


def _cues(english: str, chinese: str) -> re.Pattern[str]:
    words = "|".join(w.replace(" ", r"\s+") for w in english.split(","))
    chars = "|".join(chinese.split(","))
    return re.compile(rf"\b(?:{words})|(?:{chars})")


# Ties go to the earlier domain: a preference about a hobby is a preference.
DOMAIN_CUES: dict[Domain, re.Pattern[str]] = {
    "tasks_and_schedules": _cues(
        "remind,reminder,schedul,appointment,deadline,due,meeting,tomorrow,tonight,next week,next month,"
        "this weekend,monday,tuesday,wednesday,thursday,friday,saturday,sunday,calendar,to-do,todo,"
        "to do list,book a,reserv,flight,dentist,plan to,planning to,need to,have to,don't forget,"
        r"at \d{1,2}(?::\d\d)?\s*(?:am|pm)",
        r"提醒,日程,安排,预约,预订,截止,会议,开会,明天,后天,今晚,下周,下个月,这周末,周[一二三四五六日末],星期,"
        r"待办,计划,打算,航班,机票,牙医,要记得,别忘,\d+点,[一二三四五六七八九十]+点",
    ),
    "user_preferences": _cues(
        "like,love,hate,prefer,favorite,favourite,dislike,enjoy,can't stand,cannot stand,allergic,"
        "vegetarian,vegan,pescatarian,keto,gluten,dairy,intoleran,react badly,fan of,into,switched,taste,rather,spicy,sweet,coffee,tea,drink,food,eat,meal",
        "喜欢,爱吃,爱喝,讨厌,偏好,更爱,最爱,不爱,口味,过敏,素食,吃素,受不了,改成,换成,改喝,改吃,辣,甜,偏爱,习惯,咖啡,茶,喝,吃",
    ),
    "professional_and_academic": _cues(
        "work,job,office,colleague,cowork,boss,manager,project,career,company,salary,promot,interview,"
        "universit,college,school,degree,thesis,paper,research,exam,course,class,professor,engineer,"
        "developer,programm,coding,code,startup,client,lab,phd,master,internship,resume",
        "工作,公司,同事,老板,领导,项目,职业,工资,薪水,升职,面试,大学,学校,学位,论文,研究,考试,课程,教授,"
        "工程师,程序,代码,上班,加班,专业,读博,硕士,博士,实习,简历,客户,实验室,创业",
    ),
    "social_and_relationships": _cues(
        "friend,family,wife,husband,partner,girlfriend,boyfriend,mother,mom,mum,father,dad,sister,"
        "brother,son,daughter,kid,child,parent,married,wedding,neighbo,relationship,grandm,grandp,"
        "cousin,aunt,uncle,roommate,birthday party,anniversar",
        "朋友,家人,妻子,老婆,丈夫,老公,女朋友,男朋友,对象,妈妈,母亲,爸爸,父亲,姐姐,妹妹,哥哥,弟弟,儿子,女儿,"
        "孩子,父母,结婚,婚礼,邻居,聚会,奶奶,爷爷,外婆,外公,表哥,表姐,室友,纪念日",
    ),
    "lifestyle_and_interests": _cues(
        "hobby,hobbies,sport,hik,run,jog,swim,yoga,gym,fitness,travel,trip,vacation,holiday,music,"
        "guitar,piano,concert,movie,film,book,novel,read,cook,bak,recipe,game,gaming,garden,photograph,"
        "pet,dog,cat,paint,draw,danc,ski,climb,cycl,bike,camp,fish,restaurant",
        "爱好,运动,爬山,徒步,跑步,游泳,瑜伽,健身,旅行,旅游,度假,音乐,吉他,钢琴,演唱会,电影,书,小说,阅读,"
        "做饭,烘焙,菜谱,游戏,花园,摄影,宠物,狗,猫,画画,跳舞,滑雪,攀岩,骑车,露营,钓鱼,餐厅",
    ),
}

# Greetings, thanks and reactions: talk that asks nothing of memory.
SMALL_TALK = re.compile(
    r"^\W*(?:hi|hello|hey|thanks|thank you|thx|good (?:morning|night|evening|afternoon)|bye|goodbye|"
    r"see you|ok|okay|cool|nice|great|lol|haha|how are you|how's it going|what's up|sure|yes|no|yep|nope|"
    r"你好|您好|嗨|哈喽|谢谢|多谢|早上好|晚安|再见|拜拜|好的|好吧|嗯|哈哈|没事|不客气|你好吗|最近怎么样|在吗)"
    r"[\s\W]*(?:(?:there|again|so much|a lot|man|buddy|呀|啊|呢|哦|吧|了|啦|哈)[\s\W]*)*$",
    re.IGNORECASE,
)


def domain_counts(text: str) -> dict[Domain, int]:
    """How many cues of each domain the text holds (case-folded)."""
    folded = text.casefold()
    return {domain: len(pattern.findall(folded)) for domain, pattern in DOMAIN_CUES.items()}


def best_domain(text: str) -> Domain | None:
    """The domain with most cues (ties: the order of DOMAIN_CUES), or None when none matches."""
    counts = domain_counts(text)
    best = max(counts.values(), default=0)
    if best == 0:
        return None
    return next(d for d, n in counts.items() if n == best)


def is_small_talk(text: str) -> bool:
    return bool(SMALL_TALK.match(text.strip()))
