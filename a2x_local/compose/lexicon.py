"""Words the rule decomposer reads: actions a service performs, sequence and condition markers, in English and
Chinese. Plain data and small predicates, no model.

Action verbs come in two sets. ``VERBS`` are verbs wherever they open a clause ("and translate it"); Chinese verbs
after "，" or "并" are taken as verbs too ("，并预订座位"). ``HOMOGRAPHS`` are as often nouns or adjectives ("phone and
email address", "law and order", "a quiet and open space"): after "and" they count as an action only when a
determiner or pronoun follows ("and email the forecast", "and order a cake"); otherwise the text cannot tell, and the
registry decides (see rules.py). Imperatives are base forms, so "records" or "books" never match.
"""

from __future__ import annotations

import re

VERBS = frozenset("""
add analyse analyze ask buy calculate cancel compare compute convert create delete describe explain extract fetch
find generate geocode get give identify install invite locate navigate notify purchase recognise recognize recommend
remind remove rename reserve resize retrieve scrape send show suggest summarise summarize tell transcribe translate
tweet unsubscribe subscribe verify validate compress crop rotate proofread let help bring make take put look go
keep use join wake
""".split())
HOMOGRAPHS = frozenset("""
adjust aggregate alert announce answer append apply approve archive arrange assign attach back bake block book browse
call capture categorise categorize chart check clean clear clone close collect comment compile complete confirm
connect contact copy count crawl debug decode decrypt define deliver deploy design detect dictate disable download
draft draw edit email enable encode encrypt estimate explore export file fill film fix flag follow forecast format
forward gather grab hire import inform insert label launch list lock log lookup manage map mark measure merge
message migrate modify monitor move mute note open order organise organize paste pause pay ping plan play plot post
predict prepare print publish query rate read record refresh register reject renew rent reply request reschedule
respond restart restore retweet review revert route run save scan schedule score search see set share ship sign sort
speak split start stop store stream submit switch sync tag test text tidy track transfer turn uninstall unlock unmute
update upgrade upload visit watch withdraw write report pull push commit fork release return exchange refund charge
bill invoice quote water feed walk drive park host deposit wire cite caption subtitle dub mix cut trim filter
highlight sketch render train tune profile patch mail fax phone warn interview rank grade vote survey pack screenshot
photograph
""".split())
ACTION_WORDS = VERBS | HOMOGRAPHS
# What makes a homograph after "and" a verb: an object that opens with one of these ("and book a table").
DETERMINERS = frozenset("""
a an the my your our his her their its this that these those it them me him us some any all each every both
another one two three four five six ten up out down off back in on to for with there here
""".split())
# Complement takers: "check if", "find out whether", "tell me when" ask a question, they set no condition.
COMPLEMENT_TAKERS = frozenset("check see verify confirm know ask wonder determine test decide remember learn out"
                              .split())
# Words that cannot open an imperative: a clause opening with one is a phrase ("In Paris, ...", "For my trip, ...").
FUNCTION_WORDS = frozenset("""
a an the this that these those my your our his her their its some any all each every no in on at for from to of by
with about into onto over under near after before during since until as than if when whenever once while because
though although so but or and nor yet i you he she it we they me him us them there here what which who whom whose
where why how is are was were be been am do does did has have had will would can could should may might must not
very today tomorrow tonight yesterday now hi hello hey thanks thank dear yes ok okay
""".split())
# Words that point back at an earlier result: a clause holding one depends on the step before it.
ANAPHORS = frozenset("it them its their there those these both".split())
_BACK = re.compile(r"\bthe\s+(?:result|results|output|summary|same|list|file|answer|amount|data)\b", re.IGNORECASE)
# Objects that show an unknown word before them is an imperative ("and redeploy the frontend", "and load it").
OBJECTS = frozenset("a an the my your our his her their its this these those it them me him us some all each every"
                    .split())
# Verbs that say little on their own: a clause of these, pronouns and function words restates the one before.
GENERIC_VERBS = frozenset("get do make find show give tell help pull bring take put let provide fetch send check"
                          .split())
# Words a request sentence opens with besides an action verb (a question, a polite or first-person request).
REQUEST_OPENERS = re.compile(
    r"^(?:please|pls|kindly|can|could|would|will|may|what|which|where|when|who|whom|whose|how|why|is|are|do|does|"
    r"did|should|i\s+(?:need|want|would|'d|am\s+looking|'m\s+looking|have\s+to|must)|i'd|i’d|we\s+(?:need|want|"
    r"would)|let\s+me|help\s+me|also)\b", re.IGNORECASE)
REQUEST_ANYWHERE = re.compile(r"\b(?:can you|could you|would you|will you|please|i need|i want|i would like|i'd like"
                              r"|i’d like|help me|tell me|show me|give me|let me know|find me|get me)\b", re.IGNORECASE)
# Leading words skipped before the verb of a clause ("please book", "also send", "then quickly email").
SOFT_OPENERS = frozenset("""
please pls kindly just also then quickly now and so ok okay afterwards afterward finally lastly next additionally
moreover furthermore besides second secondly third thirdly first firstly subsequently
""".split())

# Sequence markers, English: ordered ones make the new step depend on the one before, additive ones do not.
ORDERED = ("then", "after that", "after this", "afterwards", "afterward", "after which", "subsequently",
           "followed by", "finally", "lastly", "next", "last", "second", "secondly", "third", "thirdly", "fourth",
           "fourthly", "fifth")
ADDITIVE = ("also", "additionally", "moreover", "furthermore", "in addition", "besides", "plus", "as well",
            "on top of that", "meanwhile", "at the same time")
# Markers that open a need only before a comma ("Next, ..."; "next Monday" and "plus-size" do not).
COMMA_ONLY = ("next", "last", "plus", "as well", "second", "third", "fourth", "fifth")
# "then" after these words is a time, not a step ("since then", "until then", "by then").
THEN_TIMES = frozenset("since until till by back even only just from now".split())
CONDITIONS = ("if", "when", "whenever", "once", "as soon as", "in case", "unless", "after", "before")
# Short conditions ("if so", "if possible", "after lunch") are no need of their own.
MIN_CONDITION_WORDS = 3

# Chinese. A verb (or a disposal marker 把/将, or a polite opener) at the start of a clause marks an action.
ZH_VERBS = tuple(sorted(set("""
查 查询 查看 查找 查一下 搜索 搜 找 寻找 订 预订 预定 预约 买 购买 下单 支付 付款 缴纳 缴 交 转账 发 发送 转发 回复
告诉 通知 提醒 翻译 转换 转成 换算 计算 算 统计 总结 概括 汇总 生成 创建 新建 制作 做 写 撰写 起草 编辑 修改 删除 删
添加 加入 保存 存 存入 上传 下载 安装 备份 导出 导入 打印 发布 分享 推荐 比较 对比 分析 识别 提取 扫描 检测 检查 监控
跟踪 追踪 打开 关闭 开启 调 调到 设置 设定 安排 规划 导航 播放 暂停 录 录制 转写 读 读取 朗读 显示 列出 给出 画 绘制
标注 标记 整理 排序 压缩 裁剪 合并 拆分 租 叫 退订 申请 取消 注册 登录 登记 开通 充值 兑换 插入 拍 拍摄 测 测量 估算
预测 解析 解释 介绍 回答 邀请 联系 拨打 打电话 寄 付 退款 办理 续订 续费 更新 同步 部署 运行 启动 停止 测试 修复 清理
下 关掉 打 订阅 评估 核对 确认 验证 填写 提交 审批 获取 抓取 爬取 收集 下单 充 存到 发到 发给 通知 挂号 点 点一份 叫一辆
""".split()), key=len, reverse=True))
ZH_OPENERS = ("帮我", "帮忙", "请你", "请", "给我", "替我", "为我", "麻烦", "顺便", "再", "也", "还", "并且", "并",
              "且",
              "然后", "接着", "之后", "另外", "同时")
ZH_DISPOSAL = ("把", "将")
ZH_ORDERED = ("然后", "接着", "之后", "随后", "最后", "再", "完了", "完成后", "其后")
ZH_ADDITIVE = ("另外", "此外", "同时", "还要", "还有", "顺便", "而且", "并且", "其次", "并", "以及")
ZH_CONDITIONS = ("如果", "假如", "要是", "若是", "若", "一旦", "只要", "等到", "等", "当")
ZH_REQUEST = re.compile(r"^(?:帮|请|给我|替我|为我|麻烦|我想|我要|我需要|能不能|可以|能否)|[吗呢？?]$|我想|我要|我需要")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
WORD = re.compile(r"[^\W\d_](?:[\w'’-]*\w)?|\d[\w.,:/-]*", re.UNICODE)
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def words(text: str) -> list[str]:
    """Lower-case Latin words of a text (what English rules look at)."""
    return [w.lower() for w in LATIN_WORD.findall(text)]


def is_cjk(text: str) -> bool:
    return bool(CJK.search(text))


def size(text: str) -> int:
    """How much a piece says: its CJK characters plus its other words."""
    cjk = len(CJK.findall(text))
    return cjk + len([w for w in WORD.findall(CJK.sub(" ", text))])


def _strip_openers(tokens: list[str]) -> list[str]:
    index = 0
    while index < len(tokens) - 1 and tokens[index] in SOFT_OPENERS:
        index += 1
    return tokens[index:]


_WISH = re.compile(r"^(?:i|we)\s+(?:also\s+|really\s+|still\s+)?(?:need|want|would\s+(?:also\s+)?like|'d\s+like|"
                   r"’d\s+like|am\s+looking\s+for|'m\s+looking\s+for|have\s+to|must|require)\b|^(?:i'd|i’d)\s+", re.I)
_ALSO = frozenset("also too additionally another".split())


def wish_without_action(text: str) -> bool:
    """A first-person wish that names no action and adds nothing ("I need a sleeper berth.", "I would like it in
    English."): a constraint on the step before, not a step. "I also need a taxi" and "I need to book a taxi" are
    steps."""
    tokens = _strip_openers(words(text))
    if not _WISH.match(" ".join(tokens)):
        return False
    rest = tokens[2:]
    return not any(t in ACTION_WORDS for t in rest) and not any(t in _ALSO for t in tokens) and "as well" not in (
        " ".join(tokens))


def english_action(text: str) -> str | None:
    """How an English clause opens: "verb" (an action verb), "homograph" (a verb or a noun, undecided), "request"
    (a first-person or polite request), or None (a noun phrase, a name, a context)."""
    tokens = _strip_openers(words(text))
    if not tokens:
        return None
    first = tokens[0]
    following = tokens[1] if len(tokens) > 1 else ""
    if _WISH.match(" ".join(tokens)) or (first == "you" and following in ("need", "should", "must")):
        return None if wish_without_action(text) else "request"
    if first in ("i'd", "i’d", "let", "help") or (first == "can" and following == "you"):
        return "request"
    if first in VERBS or (first in HOMOGRAPHS and following in DETERMINERS) or _unknown_imperative(first, following):
        return "verb"
    return "homograph" if first in HOMOGRAPHS else None


def _unknown_imperative(first: str, following: str) -> bool:
    """A word the lexicon lacks, in base form, with an object after it: an imperative ("redeploy the frontend",
    "page the on-call engineer", "load it"). Plurals, participles and adverbs are not ("gyms the kids love")."""
    return (following in OBJECTS and first.isalpha() and len(first) > 2 and first not in FUNCTION_WORDS
            and first not in DETERMINERS and not first.endswith(("ing", "ed", "ly"))
            and not (first.endswith("s") and not first.endswith("ss")))


def restates(text: str) -> bool:
    """A clause that says almost nothing of its own besides pointing back ("Can you get it for me?")."""
    own = [t for t in _strip_openers(words(text)) if t not in FUNCTION_WORDS and t not in GENERIC_VERBS
           and t not in ANAPHORS and t not in ("can", "could", "please", "would", "up")]
    return refers_back(text) and len(own) < 2


def english_has_action(text: str) -> bool:
    """Whether an English clause asks for something: an action verb, a request, a question, or an opening word
    that can only be an imperative (one the lexicon lacks: "Pull the latest commits ...")."""
    tokens = words(text)
    opening = _strip_openers(tokens)
    return (any(token in ACTION_WORDS for token in tokens) or bool(REQUEST_OPENERS.match(" ".join(tokens)))
            or bool(REQUEST_ANYWHERE.search(text)) or text.rstrip().endswith("?")
            or (len(opening) >= 2 and opening[0] not in FUNCTION_WORDS))


def _zh_rest(text: str) -> str:
    text = text.lstrip(" ，,、：:")
    changed = True
    while changed:
        changed = False
        for opener in ZH_OPENERS:
            if text.startswith(opener) and len(text) > len(opener):
                text = text[len(opener):].lstrip(" ，,")
                changed = True
    return text


def chinese_action(text: str) -> bool:
    """Whether a Chinese clause opens with an action: a verb, or 把/将 (which always carries one)."""
    rest = _zh_rest(text)
    return rest.startswith(ZH_DISPOSAL) or rest.startswith(ZH_VERBS)


def chinese_has_action(text: str) -> bool:
    return any(verb in text for verb in ZH_VERBS) or any(mark in text for mark in ZH_DISPOSAL) or bool(
        ZH_REQUEST.search(text.strip(" 。.！!")))


def has_action(text: str) -> bool:
    return chinese_has_action(text) if is_cjk(text) else english_has_action(text)


def is_request(sentence: str) -> bool:
    """Whether a sentence asks for something (an imperative, a question, a request), rather than giving context
    ("I'm planning a trip.", "It should be cheap.")."""
    text = sentence.strip()
    if is_cjk(text):
        stripped = text.strip(" 。.！!")
        return chinese_action(stripped) or bool(ZH_REQUEST.search(stripped))
    tokens = _strip_openers(words(text))
    if not tokens or wish_without_action(text):
        return False
    return (tokens[0] in ACTION_WORDS or bool(REQUEST_OPENERS.match(" ".join(tokens))) or text.endswith("?")
            or bool(REQUEST_ANYWHERE.search(text))
            or _unknown_imperative(tokens[0], tokens[1] if len(tokens) > 1 else ""))


def refers_back(text: str) -> bool:
    """Whether a clause points at an earlier result ("send it", "translate them", "把它", "结果")."""
    if is_cjk(text):
        return any(mark in text for mark in ("它", "其", "结果", "这些", "那些", "过去", "该"))
    return any(token in ANAPHORS for token in words(text)) or bool(_BACK.search(text))
