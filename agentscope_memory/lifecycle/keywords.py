"""Keywords of a text, for the consolidation's fidelity check (what a merge must keep).

A keyword is what a reader would miss if a merge dropped it: capitalised words and phrases
(names, places, products) without stop words, snake_case identifiers, dotted paths
(`agentscope.memory.v1`, `config.yaml`), ALL_CAPS constants (all of these also where they are
written onto Chinese: "和Bob开会" has "Bob"), Chinese segments (runs of CJK
characters cut where a function character stands on its own, `function_characters`; no external
segmenter), and numbers written in
digits (`7:15`, `2026-11-23`, `3.11`, `1,000`) or, with what they count, in Chinese numerals
(`下午三点`, `五月三日`, `星期三`: "3点", "5月", "3日", "周3", as `3点` and `3月5日` are). Keywords are compared case-insensitively; a
number is kept only where it stands whole (`3` is not kept by `2023` or `3.5`), and with its unit
or counter where it has one (`number_kept`: "3 pm" is not kept by "March 3").
"""

from __future__ import annotations

import functools
import re

# English words that start sentences or are capitalised without naming anything.
STOP_WORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as is are was were be been being
    i me my we our you your he she it its they them their this that these those there here what which who
    whom when where why how not no yes do does did has have had will would can could should may might must
    also just very all any each every some many much more most other such only own same than too again
    about after before over under into out up down off once during while until because between both
    user assistant today tomorrow yesterday please thanks thank hello hi ok okay
    like use uses used using say says said tell told mention mentioned noted repeat reiterate""".split()
)
# Chinese function characters: a segment ends where one of them stands on its own (`function_characters`).
# With them the coverbs and structural particles a fact is written with: 用 ("用户用Python写" is
# about 用户, not 用户用), 跟, 比, 得, 地.
CHINESE_STOPS = frozenset("的了是在和与及或也就都而把被很吗呢吧啊呀这那有要会对从给让向我你他她它们个着过又还再并但却于以为之其才将"
                          "用跟比得地")
# Function characters only after what they belong to: the comparative 比 after what is compared
# ("用户比Bob高"), the particles 得 and 地 after their verb or adverb ("跑得快", "慢慢地走"). Right
# after a cut (or where a run begins) they begin a word instead: "买了比特币" is 比特币, not 特币,
# "跟地勤" keeps 地勤, "很得意" keeps 得意.
CHINESE_TRAILING_STOPS = frozenset("比得地")
# Common words a function character is part of: there it is no function character, and the word
# is not cut ("会议" is not 会 + 议, "过敏" not 过 + 敏, "用户" not 用 + 户). Words that are function
# words themselves (但是, 因为, 可以, 我们) are not here: cut, they leave nothing of two characters.
CHINESE_BOUND_WORDS = frozenset("""
    目的 了解 存在 在线 所在 在场 潜在 和平 温和 总和 和谐 暖和 参与 及格 成就 就业 就医 就诊 首都 成都 都市 把握
    被子 酒吧 网吧 有效 有限 拥有 有趣 具有 有名 有关 有用 有益 有机 共有 重要 需要 要求 摘要 要点 必要 纪要 要素
    会议 机会 开会 社会 会员 学会 聚会 约会 宴会 会计 晚会 协会 大会 例会 会所 体会 误会 会谈 会面 年会 舞会 会见
    对象 对话 面对 对方 反对 对手 派对 针对 对比 对面 核对 对接 应对 比对 从事 服从 供给 给予 转让 方向 向导 倾向
    导向 外向 内向 自我 他人 个性 个别 个体 着急 着陆 执着 着手 过敏 经过 超过 过去 通过 难过 过期 过年 过节 过度
    错过 路过 过程 过滤 还款 归还 偿还 还钱 再见 合并 冷却 位于 属于 行为 成为 人才 才能 天才 将来 将军 用户 使用
    费用 作用 应用 用品 常用 利用 采用 信用 用途 适用 用法 用餐 专用 实用 用具 家用 通用 备用 日用 跟踪 脚跟 比赛
    比例 比分 比较 记得 获得 得到 值得 取得 懂得 得分 心得 地址 地铁 地点 地方 本地 当地 土地 地区 地图 场地 基地 各地
    外地 地下 地球 地震 地产
""".split())

_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+\b")
_ALL_CAPS = re.compile(r"\b[A-Z][A-Z0-9_]+\b")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'’-]*(?:\s+[A-Z][A-Za-z0-9'’-]*)*")
# A number with its inner separators: a time, a date, a version, an amount, a code.
NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Where Latin letters or digits meet Han, kana or Hangul with no space between ("和Bob开会",
# "config.yaml文件"): both sides are word characters to `\b`, so the Latin patterns found no
# boundary there and missed "Bob", or ran on into the Chinese. They look at the text with a
# space put there.
_SEAM_SCRIPTS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_SCRIPT_SEAM = re.compile(rf"(?<=[{_SEAM_SCRIPTS}])(?=[A-Za-z0-9_])|(?<=[A-Za-z0-9_])(?=[{_SEAM_SCRIPTS}])")
# A number with what it counts, in Chinese: 下午三点, 3月5日, 星期三, 三个孩子, 一百五十元. It is
# kept as one keyword with its counter, its numerals as digits ("3点", "5月", "周3"): "下午3点"
# keeps "下午三点", and "周三" does not keep "三点". Chinese numerals count only with a counter
# after them or 第/周/星期/礼拜 before: alone they are mostly words (一起, 千万, 万一); a lone 一
# or 十 before a counter is mostly an article or an adverb (一个朋友, 十分重要) and counts only
# before a date, money or age unit.
_ZH_DIGITS = "零〇一二两三四五六七八九十百千万亿"
# Longer counters first: 三分钟 is 3分钟, not 3分 (a score), 三周岁 is 3岁, not 3周.
_UNITS = ("个小时|小时|分钟|周岁|公斤|千克|公里|毫升|点|时|分|秒|月|日|号|年|岁|元|块|角|个|次|天|周|位|只|人|楼|层|倍"
          "|斤|米|克|度|本|张|条|件|辆|台|家|杯|瓶")
_COUNTED = re.compile(rf"(?P<pre>第|周|星期|礼拜)?(?P<num>\d+(?:[.,:/-]\d+)*|[{_ZH_DIGITS}]+)(?P<unit>{_UNITS})?")
_LONE_UNITS = frozenset(["月", "日", "号", "年", "岁", "周岁", "元", "块", "楼", "层"])
# One spelling per meaning: 号 is a day of the month as 日 is, 时 an hour as 点 is, 星期三 is 周三.
_SAME_UNIT = {"号": "日", "时": "点", "个小时": "小时", "周岁": "岁", "千克": "公斤"}
# What an English (or symbol) unit after a number in digits says, one spelling per meaning: "3 pm"
# is 3pm, which "March 3" does not keep, as "3点" is not kept by "3月". A unit of one letter
# counts only written onto its number ("5m", "3h"): "a 2 m wall" is rare, "plan B 2 s" noise.
_EN_UNITS = {
    "am": "am", "a.m.": "am", "pm": "pm", "p.m.": "pm", "o'clock": "点", "o’clock": "点",
    "%": "%", "％": "%", "percent": "%", "per cent": "%",
    "ms": "ms", "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "day": "day", "days": "day", "wk": "week", "wks": "week", "week": "week", "weeks": "week",
    "month": "month", "months": "month", "yr": "year", "yrs": "year", "year": "year", "years": "year",
    "g": "g", "gram": "g", "grams": "g", "kg": "kg", "kgs": "kg", "kilo": "kg", "kilos": "kg",
    "kilogram": "kg", "kilograms": "kg", "lb": "lb", "lbs": "lb",
    "mm": "mm", "cm": "cm", "m": "m", "meter": "m", "meters": "m", "metre": "m", "metres": "m",
    "km": "km", "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "mi": "mi", "mile": "mi", "miles": "mi", "ml": "ml", "l": "l", "liter": "l", "liters": "l", "litre": "l",
    "litres": "l", "kb": "kb", "mb": "mb", "gb": "gb", "tb": "tb",
    "usd": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd", "eur": "eur", "euro": "eur",
    "euros": "eur", "gbp": "gbp", "yuan": "元", "rmb": "元", "cny": "元", "x": "times", "times": "times",
    "people": "people", "persons": "people", "person": "people",
}
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "¥": "元", "￥": "元"}
# "3 hours", "3-hour", "3h"; an ordinal ("3rd day") counts no unit.
_EN_UNIT = re.compile(
    r"(?:(?P<onto>[" + "".join(u for u in _EN_UNITS if len(u) == 1) + r"])|[\s-]?(?P<word>"
    + "|".join(re.escape(u) for u in sorted(_EN_UNITS, key=len, reverse=True) if len(u) > 1)
    + r"))(?![a-z0-9])", re.IGNORECASE)
# A day of the month beside an English month name is that month and day, as 五月三日 is:
# "March 3", "3 March", "the 3rd of March" are all 3月 and 3日. A month alone ("in May", and
# "May I...") is a word, not a number.
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH = r"(?P<month>(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?)"
_MONTH_BEFORE = re.compile(rf"\b{_MONTH}\s+$")
_MONTH_AFTER = re.compile(rf"(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b")
_ZH_VALUE = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_SCALE = {"十": 10, "百": 100, "千": 1000}
_ZH_GROUP = {"万": 10_000, "亿": 100_000_000}
# What `numbers` returns: a number in digits, alone or with its counter or unit.
_NUMBER_KEYWORD = re.compile(r"(?P<pre>第|周)?(?P<value>\d+(?:[.,:/-]\d+)*)(?P<unit>"
                             + "|".join(sorted({*_UNITS.split("|"), *_EN_UNITS.values()}, key=len, reverse=True))
                             + ")?")


# A discourse marker: a clause in which the writer only points back at what was said ("As I
# mentioned before:", "(I said this earlier)", "just to repeat", "again", "我之前说过：", "（再说一遍）",
# "重复一下"). It states no fact, so it keeps no sentence whose rest is said, and a sentence kept is
# kept without it. Recognised by what its words are, not by a list of phrases: a word of saying or
# repeating, and besides it only words that point at the speaker, the listener or the time before
# (I, you, as, like, before, already; 我, 你, 之前, 一遍...). A name, a number, a negation or any
# other word makes it a clause of the fact: "Bob said so", "the user said no", "I didn't say that",
# "the alarm repeats" stay. Only a whole clause (set apart by punctuation) is one.
_SAYING_EN = frozenset("""say says said saying tell told mention mentions mentioned mentioning state stated
    repeat repeats repeated repeating reiterate reiterated reiterating again""".split())
_POINTING_EN = frozenset("""as like i we you me us my our it this that so just to before earlier previously already
    above once more one time last ve d have had and but well ok okay myself""".split())
_SAYING_ZH = frozenset("说 讲 提 提到 提醒 重复 重申 强调 告诉 所说 所述 所讲 再次".split())
_POINTING_ZH = frozenset("""我 我们 你 你们 之前 以前 前面 先前 上面 刚才 上次 早就 已经 再 又 还 也 就 过 了 的 一遍 一下 一次
    如 正如 就像 像 如前 如上 重新""".split())
_ZH_MARKER_PIECES = sorted(_SAYING_ZH | _POINTING_ZH, key=len, reverse=True)
_LATIN_CLAUSE_TEXT = re.compile(r"[A-Za-z'’ -]+")


@functools.lru_cache(maxsize=4096)  # asked again for each original the merge tries first
def is_discourse_marker(clause: str) -> bool:
    """Whether `clause` (one clause, its punctuation aside) only points back at what was said."""
    clause = clause.strip()
    if _LATIN_CLAUSE_TEXT.fullmatch(clause):
        words = re.findall(r"[a-z]+", clause.casefold())
        return 0 < len(words) <= 8 and any(w in _SAYING_EN for w in words) \
            and all(w in _SAYING_EN or w in _POINTING_EN for w in words)
    if not 0 < len(clause) <= 16 or not _CJK_RUN.fullmatch(clause):
        return False
    # Whether clause[i:] is made of the pieces, and with a word of saying where `said` is not yet.
    ends: dict[tuple[int, bool], bool] = {}

    def made_of(i: int, said: bool) -> bool:
        if i == len(clause):
            return said
        if (i, said) not in ends:
            ends[(i, said)] = any(clause.startswith(piece, i) and made_of(i + len(piece), said or piece in _SAYING_ZH)
                                  for piece in _ZH_MARKER_PIECES)
        return ends[(i, said)]

    return made_of(0, False)


def _chinese_value(run: str) -> int:
    """二〇二六 -> 2026 (digit by digit), 十二 -> 12, 一百五十 -> 150, 三万五千 -> 35000."""
    if not any(ch in _ZH_SCALE or ch in _ZH_GROUP for ch in run):
        return int("".join(str(_ZH_VALUE[ch]) for ch in run))
    total = section = digit = 0
    for ch in run:
        if ch in _ZH_VALUE:
            digit = _ZH_VALUE[ch]
        elif ch in _ZH_SCALE:
            section += (digit or 1) * _ZH_SCALE[ch]
            digit = 0
        else:
            total = (total + section + digit) * _ZH_GROUP[ch]
            section = digit = 0
    return total + section + digit


def _bound(text: str, i: int) -> tuple[bool, bool]:
    """Whether text[i] makes a word of `CHINESE_BOUND_WORDS` with the character (before, after) it."""
    return i > 0 and text[i - 1:i + 1] in CHINESE_BOUND_WORDS, text[i:i + 2] in CHINESE_BOUND_WORDS


def _segment_run(run: str) -> tuple[list[str], set[int]]:
    """A run of CJK characters cut at its function characters: (its pieces, where the function
    characters stand). A function character's word is a piece of its own, as the character alone
    would have been a cut: "花生过敏" is 花生 and 过敏, "重要会议" 重要 and 会议 (a segment is kept
    whole or lost whole by a merge, so the shorter the better, and these edges are the ones known
    without a segmenter)."""
    pieces: list[str] = []
    functions: set[int] = set()
    segment = ""
    # Whether the character before is a cut, the end of a word or none: it makes no word with this one.
    taken = True
    i = 0
    while i < len(run):
        ch = run[i]
        before, after = _bound(run, i) if ch in CHINESE_STOPS else (False, False)
        before = before and not taken and segment != ""
        # Before a word of its own a function character is one: "有用户" is 有 | 用户, not 有用 | 户.
        after = after and run[i + 1:i + 3] not in CHINESE_BOUND_WORDS
        taken = False
        leads = ch in CHINESE_TRAILING_STOPS and (i == 0 or i - 1 in functions) and not after
        if ch not in CHINESE_STOPS or (before and after) or leads:  # inside two words ("开会议"): no edge known
            segment += ch
        elif after:  # starts a word: 花生 | 过敏
            pieces += [segment, run[i:i + 2]]
            segment = ""
            taken = True
            i += 1
        elif before:  # ends one: 张经理 | 开会
            pieces += [segment[:-1], segment[-1] + ch]
            segment = ""
            taken = True
        else:  # a function character: a cut
            pieces.append(segment)
            functions.add(i)
            segment = ""
            taken = True
        i += 1
    pieces.append(segment)
    return pieces, functions


def function_characters(text: str) -> set[int]:
    """Where in `text` a function character stands: one of `CHINESE_STOPS` that makes no word
    (`CHINESE_BOUND_WORDS`) with the character before or after it. "用户用Python" has one, the
    second 用; "过敏" and "会议" have none."""
    out: set[int] = set()
    for run in _CJK_RUN.finditer(text):
        out.update(run.start() + i for i in _segment_run(run.group())[1])
    return out


def _chinese_segments(text: str) -> list[str]:
    # A discourse marker ("我之前说过", "再说一遍") is nothing a merge must keep.
    return [piece for run in _CJK_RUN.findall(text) if not is_discourse_marker(run)
            for piece in _segment_run(run)[0] if len(piece) >= 2]


def _capitalised(text: str) -> list[str]:
    out: list[str] = []
    for match in _CAPITALISED.findall(text):
        words = [w for w in match.split() if w.lower().strip("'’-") not in STOP_WORDS]
        if not words:
            continue
        phrase = " ".join(words)
        if len(phrase) >= 2:
            out.append(phrase)
    return out


def _english_unit(text: str, start: int, end: int) -> tuple[str, ...]:
    """What a number in digits at text[start:end] counts, from what stands around it: a unit
    after it ("3 pm", "5kg", "30%"), a currency sign before it ("$5"), a month name beside a day
    ("March 3" -> month and day). () when nothing: the number stands alone."""
    value = text[start:end]
    before = text[max(0, start - 16):start]
    if value.isdigit() and 1 <= int(value) <= 31:
        month = _MONTH_BEFORE.search(before) or _MONTH_AFTER.match(text, end)
        if month:
            return f"{_MONTHS.index(month.group('month')[:3].lower()) + 1}月", f"{int(value)}日"
    if before[-1:] in _CURRENCY:
        return (value + _CURRENCY[before[-1]],)
    unit = _EN_UNIT.match(text, end)
    if unit:
        spelled = (unit.group("onto") or unit.group("word")).lower()
        return (value + _EN_UNITS[spelled],)
    return ()


def numbers(text: str) -> set[str]:
    """The numbers of `text`, whole: in digits ("7:15", "2026-11-23"), and, where a counter or
    unit goes with them, with it: Chinese numerals as digits ("3点" for 三点 and 3点), English
    units one way ("3pm" for "3 pm" and "3 p.m.", "5kg", "$5" as "5usd"), a day beside a month
    name as its month and day ("March 3" is "3月" and "3日", as 三月三日 is)."""
    out: set[str] = set()
    for _, found in _numbers_at(text):
        out.update(found)
    return out


def without_numbers(text: str, mark: str = " ") -> str:
    """`text` with each of its numbers (as `numbers` finds them, counter included: 一万五千元,
    下午3点's 3点) replaced by `mark`: what the text says besides its numbers."""
    out, last = [], 0
    for (start, end), _ in _numbers_at(text):
        out += [text[last:start], mark]
        last = end
    return "".join(out) + text[last:]


def _numbers_at(text: str) -> list[tuple[tuple[int, int], tuple[str, ...]]]:
    """Where `numbers` finds each number of `text` (the span of its digits or numerals and
    Chinese counter) and what it finds there."""
    out: list[tuple[tuple[int, int], tuple[str, ...]]] = []
    for match in _COUNTED.finditer(text):
        pre, num, unit = match.group("pre"), match.group("num"), match.group("unit")
        if num[0].isdigit():
            if not num.isascii():  # digits of another script: kept as written, alone
                out.append((match.span(), tuple(NUMBER.findall(num))))
                continue
            value = num
            if not (pre or unit):
                out.append((match.span(), _english_unit(text, match.start("num"), match.end("num")) or (value,)))
                continue
        elif not (pre or unit) or (num in ("一", "十") and not pre and unit not in _LONE_UNITS):
            continue
        else:
            value = str(_chinese_value(num))
        prefix = "" if not pre else "第" if pre == "第" else "周"
        out.append((match.span(), (prefix + value + _SAME_UNIT.get(unit or "", unit or ""),)))
    return out


def is_number(keyword: str) -> bool:
    """Whether a keyword is a number (what `numbers` returns), which a merge must keep."""
    return _NUMBER_KEYWORD.fullmatch(keyword) is not None


def number_value(number: str) -> str:
    """A number of `numbers` without its counter or unit: "3pm" -> "3", "第12层" -> "12"."""
    parts = _NUMBER_KEYWORD.fullmatch(number)
    return parts.group("value") if parts else number


def number_kept(number: str, present: set[str]) -> bool:
    """Whether a number (of `numbers`) is kept by the numbers `present`: as it is, with its unit
    where it had one ("3pm" is not kept by "3日"), or, standing alone in its text, with any unit
    ("at 3" is kept by "at 3 pm": the merge says more, not something else)."""
    if number in present:
        return True
    parts = _NUMBER_KEYWORD.fullmatch(number)
    if parts is None or parts.group("pre") or parts.group("unit"):
        return False
    for other in present:
        found = _NUMBER_KEYWORD.fullmatch(other)
        if found is not None and found.group("value") == number:
            return True
    return False


def keywords(text: str) -> set[str]:
    """The keywords of `text`, case-folded."""
    found: list[str] = list(numbers(text))  # on the text as written: "3点" is one number
    latin = _SCRIPT_SEAM.sub(" ", text)
    found += _SNAKE.findall(latin)
    found += _DOTTED.findall(latin)
    found += [w for w in _ALL_CAPS.findall(latin) if len(w) >= 2]
    # Identifiers and constants are keywords whole: their parts are not names of their own.
    rest = _ALL_CAPS.sub(" | ", _DOTTED.sub(" | ", _SNAKE.sub(" | ", latin)))
    found += _capitalised(rest)
    found += _chinese_segments(text)
    return {k.casefold() for k in found if k.strip()}


def retained(keyword_set: set[str], text: str) -> tuple[float, list[str]]:
    """(share of `keyword_set` present in `text`, the keywords missing, sorted). No keywords
    to keep counts as everything kept."""
    if not keyword_set:
        return 1.0, []
    folded = text.casefold()
    present = numbers(text)
    lost = sorted(k for k in keyword_set if (not number_kept(k, present) if is_number(k) else k not in folded))
    return 1.0 - len(lost) / len(keyword_set), lost
