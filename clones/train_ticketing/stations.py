"""Stations and railway corridors of the train-ticketing clone.

Station names are real Chinese place names; everything else (kilometre posts, sale times) is
invented but plausible. Searching is by city, as in the real app: choosing 北京 finds trains from
北京, 北京南 and 北京西, and the filter screen narrows to one station.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from clones.train_ticketing.station_directory import directory


@dataclass(frozen=True)
class Station:
    name: str
    pinyin: str
    initials: str
    city: str
    sale_time: str  # the daily hour at which this station's tickets go on sale (起售时间)

    def as_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "pinyin": self.pinyin,
            "initials": self.initials,
            "city": self.city,
            "sale_time": self.sale_time,
            "letter": self.pinyin[0].upper(),
        }


STATIONS: tuple[Station, ...] = (
    Station("北京", "beijing", "bj", "北京", "13:30"),
    Station("北京南", "beijingnan", "bjn", "北京", "13:30"),
    Station("北京西", "beijingxi", "bjx", "北京", "13:30"),
    Station("天津", "tianjin", "tj", "天津", "14:30"),
    Station("天津南", "tianjinnan", "tjn", "天津", "14:30"),
    Station("武清", "wuqing", "wq", "天津", "14:30"),
    Station("济南", "jinan", "jn", "济南", "14:00"),
    Station("济南西", "jinanxi", "jnx", "济南", "14:00"),
    Station("泰安", "taian", "ta", "泰安", "14:00"),
    Station("徐州", "xuzhou", "xz", "徐州", "15:00"),
    Station("徐州东", "xuzhoudong", "xzd", "徐州", "15:00"),
    Station("蚌埠南", "bengbunan", "bbn", "蚌埠", "15:30"),
    Station("南京", "nanjing", "nj", "南京", "14:30"),
    Station("南京南", "nanjingnan", "njn", "南京", "14:30"),
    Station("常州北", "changzhoubei", "czb", "常州", "15:00"),
    Station("苏州", "suzhou", "sz", "苏州", "15:30"),
    Station("苏州北", "suzhoubei", "szb", "苏州", "15:30"),
    Station("上海", "shanghai", "sh", "上海", "15:00"),
    Station("上海虹桥", "shanghaihongqiao", "shhq", "上海", "15:00"),
    Station("嘉兴南", "jiaxingnan", "jxn", "嘉兴", "14:00"),
    Station("杭州东", "hangzhoudong", "hzd", "杭州", "15:30"),
    Station("义乌", "yiwu", "yw", "义乌", "15:00"),
    Station("金华", "jinhua", "jh", "金华", "15:00"),
    Station("石家庄", "shijiazhuang", "sjz", "石家庄", "12:30"),
    Station("郑州", "zhengzhou", "zz", "郑州", "13:00"),
    Station("郑州东", "zhengzhoudong", "zzd", "郑州", "13:00"),
    Station("洛阳", "luoyang", "ly", "洛阳", "12:00"),
    Station("洛阳龙门", "luoyanglongmen", "lylm", "洛阳", "12:00"),
    Station("西安", "xian", "xa", "西安", "08:00"),
    Station("西安北", "xianbei", "xab", "西安", "08:00"),
    Station("武汉", "wuhan", "wh", "武汉", "12:30"),
    Station("长沙", "changsha", "cs", "长沙", "10:00"),
    Station("长沙南", "changshanan", "csn", "长沙", "10:00"),
    Station("广州", "guangzhou", "gz", "广州", "13:30"),
    Station("广州南", "guangzhounan", "gzn", "广州", "13:30"),
    Station("广州东", "guangzhoudong", "gzd", "广州", "13:30"),
    Station("东莞", "dongguan", "dg", "东莞", "12:00"),
    Station("深圳", "shenzhen", "sz", "深圳", "12:00"),
    Station("深圳北", "shenzhenbei", "szb", "深圳", "12:00"),
    Station("成都东", "chengdudong", "cdd", "成都", "11:00"),
    Station("内江北", "neijiangbei", "njb", "内江", "11:00"),
    Station("重庆北", "chongqingbei", "cqb", "重庆", "11:30"),
)


def _directory() -> tuple[Station, ...]:
    """Every station of the directory; the served ones as above, the others opening sales at
    their city's hour when a served station shares the city, else at an invented half hour
    between 08:00 and 18:00 (stable per city; real sale hours are per station and not modelled)."""
    served = {s.name: s for s in STATIONS}
    city_hour = {s.city: s.sale_time for s in STATIONS}
    out = list(STATIONS)
    for name, pinyin, initials, city in directory():
        if name in served:
            continue
        hour = city_hour.get(city)
        if hour is None:
            slot = zlib.crc32(city.encode("utf-8")) % 21
            hour = f"{8 + slot // 2:02d}:{30 * (slot % 2):02d}"
        out.append(Station(name, pinyin, initials, city, hour))
    return tuple(out)


# The stations a user can pick and search: several hundred real stations; only STATIONS have trains.
DIRECTORY: tuple[Station, ...] = _directory()

BY_NAME: dict[str, Station] = {s.name: s for s in DIRECTORY}

CITIES: frozenset[str] = frozenset(s.city for s in DIRECTORY)


def is_place(name: str) -> bool:
    """A station name, or a city name (searching by city covers all its stations)."""
    return name in BY_NAME or name in CITIES


def sale_time_of(place: str) -> str:
    """Stations of one city open sales at the same hour."""
    st = BY_NAME.get(place) or next(s for s in STATIONS if s.city == place)
    return st.sale_time


HOT_CITIES: tuple[str, ...] = (
    "北京",
    "上海",
    "天津",
    "广州",
    "深圳",
    "杭州",
    "南京",
    "武汉",
    "成都",
    "重庆",
    "西安",
    "郑州",
)


@dataclass(frozen=True)
class Corridor:
    """A line trains run along, with the kilometre post of every station and how many services of
    each train type run per direction. ``numbers`` gives the first train number for each type."""

    name: str
    stops: tuple[tuple[str, int], ...]
    services: tuple[tuple[str, int, int], ...]  # (train type, services per direction, first number)


CORRIDORS: tuple[Corridor, ...] = (
    Corridor(
        "京沪高铁",
        (
            ("北京南", 0),
            ("天津南", 122),
            ("济南西", 406),
            ("泰安", 465),
            ("徐州东", 692),
            ("蚌埠南", 848),
            ("南京南", 1023),
            ("常州北", 1153),
            ("苏州北", 1237),
            ("上海虹桥", 1318),
        ),
        (("G", 12, 1), ("D", 2, 301)),
    ),
    Corridor(
        "京广高铁",
        (
            ("北京西", 0),
            ("石家庄", 281),
            ("郑州东", 693),
            ("武汉", 1229),
            ("长沙南", 1591),
            ("广州南", 2298),
            ("深圳北", 2400),
        ),
        (("G", 8, 401),),
    ),
    Corridor(
        "沪昆高铁",
        (("上海虹桥", 0), ("嘉兴南", 84), ("杭州东", 159), ("义乌", 303), ("金华", 345)),
        (("G", 8, 7301), ("D", 4, 3101)),
    ),
    Corridor("京津城际", (("北京南", 0), ("武清", 74), ("天津", 120)), (("C", 8, 2001),)),
    Corridor("成渝高铁", (("成都东", 0), ("内江北", 151), ("重庆北", 308)), (("G", 4, 8501), ("D", 2, 6101))),
    Corridor(
        "徐兰高铁", (("郑州东", 0), ("洛阳龙门", 130), ("西安北", 484)), (("G", 3, 2201), ("D", 2, 2501))
    ),
    Corridor("广深城际", (("广州东", 0), ("东莞", 54), ("深圳", 139)), (("C", 5, 7001), ("D", 2, 7101))),
    Corridor(
        "京沪线",
        (
            ("北京", 0),
            ("天津", 137),
            ("济南", 497),
            ("徐州", 814),
            ("南京", 1160),
            ("苏州", 1376),
            ("上海", 1463),
        ),
        (("Z", 2, 21), ("T", 1, 109), ("K", 2, 1041)),
    ),
    Corridor(
        "京广线",
        (("北京西", 0), ("石家庄", 277), ("郑州", 689), ("武汉", 1225), ("长沙", 1587), ("广州", 2294)),
        (("Z", 1, 201), ("T", 1, 15), ("K", 2, 599)),
    ),
    Corridor(
        "京西线",
        (("北京西", 0), ("石家庄", 277), ("郑州", 689), ("洛阳", 813), ("西安", 1200)),
        (("Z", 1, 19), ("K", 2, 4011)),
    ),
)
