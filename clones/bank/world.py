"""The bank clone's generated world: accounts, history, payees, products, rates, branches.

Everything is drawn from one seeded `numpy.random.Generator`. Entities that tasks name (payees,
accounts in the directory, products, branches, biller accounts) keep fixed names so a task reads
the same on every seed; amounts, balances, history and rates vary with the seed (and with
``setup.data["data_seed"]`` for data drift).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

import numpy as np

OWNER = {"name": "李明", "phone": "13800005721", "id_tail": "3517"}

BANKS: list[dict[str, str]] = [
    {"code": "SELF", "name": "本行", "initial": "B"},
    {"code": "ICBC", "name": "中国工商银行", "initial": "Z"},
    {"code": "ABC", "name": "中国农业银行", "initial": "Z"},
    {"code": "BOC", "name": "中国银行", "initial": "Z"},
    {"code": "BOCOM", "name": "交通银行", "initial": "J"},
    {"code": "CMB", "name": "招商银行", "initial": "Z"},
    {"code": "PSBC", "name": "中国邮政储蓄银行", "initial": "Z"},
    {"code": "CIB", "name": "兴业银行", "initial": "X"},
    {"code": "SPDB", "name": "浦发银行", "initial": "P"},
    {"code": "CITIC", "name": "中信银行", "initial": "Z"},
    {"code": "CMBC", "name": "中国民生银行", "initial": "Z"},
    {"code": "CEB", "name": "中国光大银行", "initial": "Z"},
    {"code": "PAB", "name": "平安银行", "initial": "P"},
    {"code": "HXB", "name": "华夏银行", "initial": "H"},
    {"code": "BJB", "name": "北京银行", "initial": "B"},
]

# Saved payees (收款人名册) and other people whose accounts exist (for the 户名校验 name check).
PAYEES = [
    ("p1", "王芳", "SELF", "6217000130001234567", "妈妈"),
    ("p2", "陈静", "ICBC", "6222020200112233445", ""),
    ("p3", "刘洋", "CMB", "6225880155667788990", "房东"),
    ("p4", "赵磊", "ABC", "6228480088776655443", ""),
    ("p5", "孙悦", "BOC", "6216610200334455667", "同事"),
    ("p6", "周杰", "SELF", "6217000130007654321", ""),
]
DIRECTORY_EXTRA = [
    ("张伟", "BOCOM", "6222600110022334455"),
    ("吴敏", "SELF", "6217000130002468135"),
    ("郑浩", "CIB", "6229090011223344556"),
    ("黄丽", "PSBC", "6221880099887766554"),
    ("何强", "SPDB", "6225210033445566778"),
    ("林晓", "CMB", "6225880166778899001"),
]

DEPOSIT_TERMS = [  # (id, name, term_months, base rate in 0.01% units, minimum fen)
    ("d3m", "整存整取 3个月", 3, 105, 5_000),
    ("d6m", "整存整取 6个月", 6, 125, 5_000),
    ("d1y", "整存整取 1年", 12, 135, 5_000),
    ("d2y", "整存整取 2年", 24, 145, 5_000),
    ("d3y", "整存整取 3年", 36, 175, 5_000),
    ("d5y", "整存整取 5年", 60, 180, 5_000),
    ("cd3y", "大额存单 3年期", 36, 190, 20_000_000),
    ("n7d", "七天通知存款", 0, 45, 5_000_000),
]

FUNDS = [  # (id, name, type, risk)
    ("f01", "安盈货币A", "货币型", "R1"),
    ("f02", "稳益短债C", "债券型", "R1"),
    ("f03", "恒信纯债A", "债券型", "R2"),
    ("f04", "鑫享双债增强", "债券型", "R2"),
    ("f05", "睿远稳健配置", "混合型", "R2"),
    ("f06", "成长优选混合", "混合型", "R3"),
    ("f07", "价值精选混合", "混合型", "R3"),
    ("f08", "沪深300指数增强", "指数型", "R4"),
    ("f09", "中证500ETF联接", "指数型", "R4"),
    ("f10", "新能源产业股票", "股票型", "R5"),
    ("f11", "科技创新股票A", "股票型", "R5"),
    ("f12", "医疗健康混合", "混合型", "R4"),
]
RISK_NAMES = {"R1": "低风险", "R2": "中低风险", "R3": "中风险", "R4": "中高风险", "R5": "高风险"}
# The customer's questionnaire level and the highest product risk it allows.
CUSTOMER_LEVELS = {"C1": "R1", "C2": "R2", "C3": "R3", "C4": "R4", "C5": "R5"}
CUSTOMER_LEVEL_NAMES = {"C1": "保守型", "C2": "稳健型", "C3": "平衡型", "C4": "成长型", "C5": "进取型"}

FX = [  # (code, name, mid per 100 units in fen-like hundredths, i.e. 71850 = 718.50)
    ("USD", "美元", 71850),
    ("EUR", "欧元", 78420),
    ("JPY", "日元", 482),
    ("HKD", "港币", 9206),
    ("GBP", "英镑", 91240),
    ("AUD", "澳大利亚元", 47310),
    ("CAD", "加拿大元", 52960),
    ("SGD", "新加坡元", 53480),
    ("CHF", "瑞士法郎", 81560),
]

BRANCHES = [  # (id, name, address)
    ("b1", "朝阳门支行", "北京市东城区朝阳门北大街8号"),
    ("b2", "建国门支行", "北京市东城区建国门内大街18号"),
    ("b3", "国贸支行", "北京市朝阳区建国门外大街1号"),
    ("b4", "望京支行", "北京市朝阳区望京街10号"),
    ("b5", "中关村支行", "北京市海淀区中关村大街27号"),
    ("b6", "西单支行", "北京市西城区西单北大街120号"),
    ("b7", "亦庄支行", "北京市大兴区荣华中路5号"),
    ("b8", "通州支行", "北京市通州区新华西街58号"),
]
APPOINTMENT_SERVICES = ["个人存取款", "开卡", "大额取现", "外汇兑换", "理财咨询", "挂失补卡"]
APPOINTMENT_SLOTS = ["09:00-10:00", "10:00-11:00", "11:00-12:00", "14:00-15:00", "15:00-16:00", "16:00-17:00"]

BILLERS = {  # kind -> (company, [(account number, holder)])
    "electricity": ("国网北京市电力公司", [("0102345678", "李明"), ("0109876543", "王芳")]),
    "water": ("北京市自来水集团", [("3300123456", "李明"), ("3300654321", "王芳")]),
    "gas": ("北京燃气集团", [("7100234567", "李明"), ("7100765432", "王芳")]),
}
BILL_KIND_NAMES = {"electricity": "电费", "water": "水费", "gas": "燃气费"}
TOPUP_FACES = [3000, 5000, 10000, 20000, 30000, 50000]

RISK_QUESTIONS = [
    ("您的年龄是？", ["18-30岁", "31-50岁", "51-60岁", "60岁以上"]),
    ("您的家庭年收入约为？", ["10万元以下", "10-30万元", "30-100万元", "100万元以上"]),
    ("您的投资经验有多久？", ["没有经验", "1-3年", "3-5年", "5年以上"]),
    ("您可以接受的最大亏损是？", ["不能亏损", "10%以内", "10%-30%", "30%以上"]),
    ("您的投资目标是？", ["保本保息", "稳健增值", "较高收益", "追求高收益"]),
]

EXPENSES = {  # category -> [(counterparty, min yuan, max yuan)]
    "餐饮": [
        ("美团外卖", 18, 85),
        ("海底捞火锅", 120, 420),
        ("星巴克咖啡", 28, 68),
        ("公司食堂", 12, 30),
        ("肯德基", 25, 90),
        ("瑞幸咖啡", 9, 30),
    ],
    "购物": [("京东商城", 40, 1500), ("淘宝", 20, 600), ("盒马鲜生", 50, 400), ("永辉超市", 30, 300)],
    "交通": [("滴滴出行", 12, 95), ("北京地铁", 3, 10), ("中国石化加油站", 200, 450)],
    "娱乐": [("万达影城", 40, 160), ("爱奇艺会员", 25, 25)],
    "医疗": [("同仁堂药店", 30, 260)],
}
EXPENSE_WEIGHTS = {"餐饮": 0.45, "购物": 0.25, "交通": 0.18, "娱乐": 0.07, "医疗": 0.05}
EMPLOYER = "星河科技有限公司"
CATEGORIES = [
    "餐饮",
    "购物",
    "交通",
    "娱乐",
    "医疗",
    "工资",
    "转账",
    "缴费",
    "房租",
    "通讯",
    "理财",
    "还款",
    "其他",
]

MESSAGES = [
    ("动账通知", "您尾号{tail}的储蓄卡于{date}收到工资入账。"),
    ("信用卡账单", "您的信用卡{month}账单已出，请于{due}前还款。"),
    ("安全提醒", "请勿向任何人透露短信验证码和交易密码。"),
    ("理财推荐", "新发理财产品限时认购中，详情请查看财富频道。"),
    ("系统通知", "手机银行将于本周日凌晨2:00-4:00进行系统维护。"),
]


def _yuan_to_fen(rng: np.random.Generator, lo: int, hi: int) -> int:
    if lo == hi:
        return lo * 100
    return int(rng.integers(lo * 100, hi * 100 + 1))


def _ts(d: date, rng: np.random.Generator, lo_h: int = 8, hi_h: int = 22) -> str:
    h = int(rng.integers(lo_h, hi_h))
    m = int(rng.integers(0, 60))
    s = int(rng.integers(0, 60))
    return datetime.combine(d, time(h, m, s)).isoformat(timespec="seconds")


def bank_name(code: str) -> str:
    return next(b["name"] for b in BANKS if b["code"] == code)


def generate(
    seed: int, clock: datetime, data_seed: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """World and user documents for one task instance."""
    rng = np.random.default_rng([seed, data_seed if data_seed is not None else 0])
    today = clock.date()
    world = _world(rng)
    user = _user(rng, clock, today, world)
    return world, user


def _world(rng: np.random.Generator) -> dict[str, Any]:
    jitter = lambda: int(rng.integers(-2, 3)) * 5  # noqa: E731  (rates move in 0.05% steps)
    deposits = [
        {"id": i, "name": n, "term_months": t, "rate": r + (jitter() if t else 0), "min_fen": m}
        for i, n, t, r, m in DEPOSIT_TERMS
    ]
    funds = []
    for i, n, kind, risk in FUNDS:
        base = {"R1": 180, "R2": 320, "R3": 600, "R4": 800, "R5": 1000}[risk]
        spread = {"R1": 40, "R2": 120, "R3": 900, "R4": 1500, "R5": 2500}[risk]
        funds.append(
            {
                "id": i,
                "name": n,
                "type": kind,
                "risk": risk,
                "nav": int(rng.integers(9_800, 32_000)) if kind != "货币型" else 10_000,  # 4 decimals
                "return_1y": base + int(rng.integers(-spread, spread + 1)),  # 0.01% units
                "min_fen": 100 if kind in ("货币型", "债券型") else 1_000 * 100 // 10,
                "fee_rate": 0
                if kind == "货币型"
                else {"债券型": 8, "混合型": 15, "指数型": 12, "股票型": 15}[kind],
            }
        )
    fx = []
    for code, name, mid in FX:
        mid_now = int(round(mid * (1 + rng.normal(0, 0.004))))
        spread = max(1, mid_now // 330)
        fx.append(
            {
                "code": code,
                "name": name,
                "buy_spot": mid_now - spread,  # 现汇买入价
                "buy_cash": mid_now - spread * 6,  # 现钞买入价
                "sell_spot": mid_now + spread,  # 现汇卖出价
                "sell_cash": mid_now + spread,  # 现钞卖出价
            }
        )
    distances = rng.permutation(np.arange(300, 300 + 700 * len(BRANCHES), 700))
    branches = [
        {
            "id": i,
            "name": n,
            "address": a,
            "distance_m": int(d) + int(rng.integers(0, 300)),
            "hours": "周一至周五 09:00-17:00" if k % 3 else "周一至周日 09:00-17:00",
            "phone": f"010-{8000_0000 + int(rng.integers(0, 9999_999))}",
            "queue": int(rng.integers(0, 16)),
            "services": APPOINTMENT_SERVICES if k % 2 == 0 else APPOINTMENT_SERVICES[:4],
        }
        for k, ((i, n, a), d) in enumerate(zip(BRANCHES, distances, strict=True))
    ]
    billers = {
        kind: {
            "company": company,
            "accounts": [
                {
                    "account_no": no,
                    "holder": holder,
                    "due_fen": int(rng.integers(40, 400)) * 100 + int(rng.integers(0, 100)),
                }
                for no, holder in accounts
            ],
        }
        for kind, (company, accounts) in BILLERS.items()
    }
    directory = [{"name": n, "bank": b, "account_no": a} for _, n, b, a, _ in PAYEES]
    directory += [{"name": n, "bank": b, "account_no": a} for n, b, a in DIRECTORY_EXTRA]
    return {
        "owner": dict(OWNER),
        "banks": BANKS,
        "directory": directory,
        "deposit_products": deposits,
        "funds": funds,
        "fx": fx,
        "branches": branches,
        "billers": billers,
        "topup_faces": TOPUP_FACES,
        "risk_questions": [{"q": q, "options": o} for q, o in RISK_QUESTIONS],
        "appointment_services": APPOINTMENT_SERVICES,
        "appointment_slots": APPOINTMENT_SLOTS,
        "categories": CATEGORIES,
    }


def _user(rng: np.random.Generator, clock: datetime, today: date, world: dict[str, Any]) -> dict[str, Any]:
    accounts: list[dict[str, Any]] = [
        {
            "id": "a1",
            "name": "储蓄卡",
            "card_no": "6217000010023345678",
            "opening_fen": 0,
            "balance_fen": 0,
            "branch": "朝阳门支行",
            "default": True,
            "subaccounts": [],
        },
        {
            "id": "a2",
            "name": "工资卡",
            "card_no": "6217000010098761234",
            "opening_fen": 0,
            "balance_fen": 0,
            "branch": "国贸支行",
            "default": False,
            "subaccounts": [],
        },
    ]
    start = today - timedelta(days=183)
    txns: list[dict[str, Any]] = []

    def add(
        acc: str,
        d: date,
        amount: int,
        cat: str,
        party: str,
        summary: str,
        *,
        party_acct: str = "",
        party_bank: str = "",
        ts: str | None = None,
    ) -> None:
        txns.append(
            {
                "acc": acc,
                "ts": ts or _ts(d, rng),
                "amount_fen": amount,
                "cat": cat,
                "party": party,
                "party_acct": party_acct,
                "party_bank": party_bank,
                "summary": summary,
                "note": "",
            }
        )

    payees = [{"id": i, "name": n, "bank": b, "account_no": a, "alias": al} for i, n, b, a, al in PAYEES]
    salary = int(rng.integers(18_000, 26_000)) * 100
    rent = int(rng.integers(45, 70)) * 10_000
    d = start
    while d < today:
        if d.day == 10:
            add(
                "a2",
                d,
                salary + int(rng.integers(0, 300_00)),
                "工资",
                EMPLOYER,
                "代发工资",
                ts=datetime.combine(d, time(9, 30)).isoformat(),
            )
        if d.day == 11:
            add(
                "a2",
                d,
                -(salary // 2),
                "转账",
                "李明",
                "转账",
                party_acct=accounts[0]["card_no"],
                party_bank="本行",
            )
            add(
                "a1",
                d,
                salary // 2,
                "转账",
                "李明",
                "转账",
                party_acct=accounts[1]["card_no"],
                party_bank="本行",
            )
        if d.day == 5:
            p = payees[2]
            add(
                "a1",
                d,
                -rent,
                "房租",
                p["name"],
                "转账",
                party_acct=p["account_no"],
                party_bank=bank_name(p["bank"]),
            )
        if d.day == 18:
            for kind, label in (("electricity", "电费"), ("water", "水费"), ("gas", "燃气费")):
                if kind != "electricity" and d.month % 2:
                    continue
                company = world["billers"][kind]["company"]
                add(
                    "a1",
                    d,
                    -int(rng.integers(40, 420)) * 100 - int(rng.integers(0, 100)),
                    "缴费",
                    company,
                    label,
                )
        if d.day == 22:
            add("a1", d, -int(rng.choice([5000, 10000, 20000])), "通讯", "中国移动", "话费充值")
        for _ in range(int(rng.poisson(1.6))):
            cats = list(EXPENSE_WEIGHTS)
            cat = cats[int(rng.choice(len(cats), p=list(EXPENSE_WEIGHTS.values())))]
            party, lo, hi = EXPENSES[cat][int(rng.integers(len(EXPENSES[cat])))]
            add("a1" if rng.random() < 0.8 else "a2", d, -_yuan_to_fen(rng, lo, hi), cat, party, "消费")
        if rng.random() < 0.05:
            p = payees[int(rng.integers(len(payees)))]
            sign = -1 if rng.random() < 0.6 else 1
            add(
                "a1",
                d,
                sign * int(rng.integers(2, 60)) * 10_000,
                "转账",
                p["name"],
                "转账",
                party_acct=p["account_no"],
                party_bank=bank_name(p["bank"]),
            )
        d += timedelta(days=1)
    txns.sort(key=lambda t: t["ts"])
    for acc in accounts:
        own = [t for t in txns if t["acc"] == acc["id"]]
        # the opening balance is chosen so the running balance never dips below a cushion
        running, low = 0, 0
        for t in own:
            running += t["amount_fen"]
            low = min(low, running)
        acc["opening_fen"] = -low + int(rng.integers(25_000, 45_000)) * 100
        bal = acc["opening_fen"]
        for t in own:
            bal += t["amount_fen"]
            t["balance_fen"] = bal
        acc["balance_fen"] = bal
    for n, t in enumerate(sorted(txns, key=lambda t: t["ts"])):
        t["id"] = f"t{n + 1:04d}"
    acc0 = accounts[0]
    acc0["subaccounts"] = [
        {
            "id": "s1",
            "kind": "定期",
            "product": "d1y",
            "name": "整存整取 1年",
            "principal_fen": int(rng.integers(2, 8)) * 1_000_000,
            "rate": 145,
            "start": (today - timedelta(days=200)).isoformat(),
            "maturity": (today - timedelta(days=200) + timedelta(days=365)).isoformat(),
        },
        {
            "id": "s2",
            "kind": "定期",
            "product": "d3m",
            "name": "整存整取 3个月",
            "principal_fen": int(rng.integers(1, 5)) * 500_000,
            "rate": 105,
            "start": (today - timedelta(days=40)).isoformat(),
            "maturity": (today - timedelta(days=40) + timedelta(days=91)).isoformat(),
        },
    ]
    credit = _credit(rng, today)
    messages = []
    for k, (title, body) in enumerate(MESSAGES):
        when = clock - timedelta(days=k * 3 + 1, hours=k)
        messages.append(
            {
                "id": f"m{k + 1}",
                "title": title,
                "ts": when.isoformat(timespec="seconds"),
                "read": k >= 3,
                "body": body.format(
                    tail=accounts[1]["card_no"][-4:],
                    date=f"{when.month}月{when.day}日",
                    month=credit["bill"]["period"],
                    due=credit["bill"]["due_date"],
                ),
            }
        )
    holdings = [{"fund": "f01", "amount_fen": int(rng.integers(5, 30)) * 100_000}]
    return {
        "logged_in": False,
        "accounts": accounts,
        "txns": txns,
        "credit": credit,
        "payees": payees,
        "transfers": [
            {
                "id": "TR0000",
                "from_acc": "a1",
                "payee": "王芳",
                "account_no": PAYEES[0][3],
                "bank": "SELF",
                "amount_fen": 200_000,
                "fee_fen": 0,
                "note": "生活费",
                "arrival": "realtime",
                "when": "monthly",
                "date": None,
                "day": 15,
                "times": 12,
                "status": "已预约",
                "created": (clock - timedelta(days=75)).isoformat(timespec="seconds"),
                "single_limit_at": 5_000_000,
                "daily_limit_at": 10_000_000,
            }
        ],
        "repayments": [],
        "bill_payments": [],
        "topups": [],
        "deposit_orders": [],
        "fund_orders": [],
        "holdings": holdings,
        "limit_changes": [],
        "appointments": [],
        "installments": [],
        "risk": {"level": "C3", "date": (today - timedelta(days=120)).isoformat()},
        "settings": {
            "single_limit_fen": 5_000_000,
            "daily_limit_fen": 10_000_000,
            "notify": {"txn": True, "login": True, "credit": True, "marketing": False},
            "gesture_login": False,
            "face_login": False,
            "hide_balance": False,
        },
        "messages": messages,
        "seq": 0,
    }


def _credit(rng: np.random.Generator, today: date) -> dict[str, Any]:
    """The credit card: last statement on the 20th, due 20 days later; unbilled spending since."""
    stmt = date(today.year, today.month, 20)
    if stmt > today:
        stmt = (stmt.replace(day=1) - timedelta(days=1)).replace(day=20)
    prev = (stmt.replace(day=1) - timedelta(days=1)).replace(day=20)
    txns: list[dict[str, Any]] = []
    d = prev + timedelta(days=1)
    while d < today:
        for _ in range(int(rng.poisson(0.7))):
            cats = list(EXPENSE_WEIGHTS)
            cat = cats[int(rng.integers(len(cats)))]
            party, lo, hi = EXPENSES[cat][int(rng.integers(len(EXPENSES[cat])))]
            txns.append(
                {
                    "ts": _ts(d, rng),
                    "amount_fen": -_yuan_to_fen(rng, lo, hi),
                    "party": party,
                    "cat": cat,
                    "billed": d <= stmt,
                }
            )
        d += timedelta(days=1)
    txns.sort(key=lambda t: t["ts"])
    for n, t in enumerate(txns):
        t["id"] = f"c{n + 1:03d}"
    billed = -sum(t["amount_fen"] for t in txns if t["billed"])
    unbilled = -sum(t["amount_fen"] for t in txns if not t["billed"])
    limit = int(rng.choice([30_000, 50_000, 80_000])) * 100
    return {
        "card_no": "4367480012345678",
        "name": "信用卡",
        "limit_fen": limit,
        "bill": {
            "period": f"{stmt.year}年{stmt.month}月",
            "statement_date": stmt.isoformat(),
            "due_date": (stmt + timedelta(days=20)).isoformat(),
            "amount_fen": billed,
            "min_fen": max(billed // 10, min(billed, 10_000)),
        },
        "unbilled_fen": unbilled,
        "repaid_fen": 0,
        "txns": txns,
    }


INSTALLMENT_FEE_BP = {3: 195, 6: 360, 12: 720, 24: 1440}  # total fee, 0.01% units of the principal


def risk_level_for(answers: dict[str, int]) -> str:
    score = sum(answers.values())  # each answer 0-3, five questions: 0-15
    return (
        "C1" if score <= 2 else "C2" if score <= 5 else "C3" if score <= 8 else "C4" if score <= 11 else "C5"
    )
