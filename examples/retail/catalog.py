"""The retail sample domain's fixed world: stores, products, customers and the return policy.

Shared by `build_db.py` (which seeds shop.db from it) and the task generators (which quote the same
product names and prices), so a question about "store 3" or "the ceramic mug" means the same thing
everywhere. Prices are deliberately round (5, 8, 10, 12, 15, 20, 25, 40, ...) so the arithmetic
stays small enough for a tiny model to learn. Stdlib only.
"""

from __future__ import annotations

# (store_id, name, city, city_zh)
STORES = [
    (1, "Riverside", "Shanghai", "上海"),
    (2, "Harbor", "Shenzhen", "深圳"),
    (3, "Old Town", "Beijing", "北京"),
    (4, "Lakeside", "Hangzhou", "杭州"),
    (5, "Station", "Chengdu", "成都"),
    (6, "Airport", "Guangzhou", "广州"),
]

# (product_id, name_en, name_zh, category, unit_price in yuan)
PRODUCTS = [
    (1, "ceramic mug", "陶瓷杯", "kitchen", 12),
    (2, "glass jar", "玻璃罐", "kitchen", 8),
    (3, "bamboo cutting board", "竹砧板", "kitchen", 25),
    (4, "steel water bottle", "不锈钢水壶", "kitchen", 40),
    (5, "tea towel", "茶巾", "kitchen", 5),
    (6, "frying pan", "平底锅", "kitchen", 80),
    (7, "notebook", "笔记本", "stationery", 10),
    (8, "gel pen", "中性笔", "stationery", 5),
    (9, "desk lamp", "台灯", "home", 60),
    (10, "sticky notes", "便利贴", "stationery", 8),
    (11, "pencil case", "笔袋", "stationery", 15),
    (12, "wall calendar", "挂历", "stationery", 20),
    (13, "cotton T-shirt", "纯棉T恤", "apparel", 50),
    (14, "wool scarf", "羊毛围巾", "apparel", 120),
    (15, "running socks", "跑步袜", "apparel", 15),
    (16, "rain jacket", "雨衣", "apparel", 200),
    (17, "baseball cap", "棒球帽", "apparel", 40),
    (18, "canvas tote bag", "帆布袋", "apparel", 25),
    (19, "USB cable", "数据线", "electronics", 20),
    (20, "phone charger", "手机充电器", "electronics", 50),
    (21, "wireless mouse", "无线鼠标", "electronics", 100),
    (22, "earphones", "耳机", "electronics", 150),
    (23, "power bank", "充电宝", "electronics", 120),
    (24, "LED bulb", "LED灯泡", "home", 12),
    (25, "scented candle", "香薰蜡烛", "home", 30),
    (26, "photo frame", "相框", "home", 25),
    (27, "cushion cover", "抱枕套", "home", 30),
    (28, "storage box", "收纳盒", "home", 20),
    (29, "green tea (100 g)", "绿茶（100克）", "food", 40),
    (30, "dark chocolate bar", "黑巧克力", "food", 10),
]

CUSTOMERS_EN = [
    "Lin Wei",
    "Sarah Chen",
    "Tom Baker",
    "Aisha Khan",
    "Marco Rossi",
    "Emma Liu",
    "David Park",
    "Nora Smith",
    "Ken Sato",
    "Olivia Brown",
    "Raj Patel",
    "Sofia Garcia",
    "Leo Zhang",
    "Mia Wong",
    "Jack Wilson",
    "Hana Kim",
    "Ivan Petrov",
    "Chloe Martin",
    "Sam Lee",
    "Grace Ho",
]
CUSTOMERS_ZH = [
    "王芳",
    "李娜",
    "张伟",
    "刘洋",
    "陈静",
    "杨磊",
    "赵敏",
    "黄强",
    "周杰",
    "吴婷",
    "徐丽",
    "孙浩",
    "马超",
    "朱琳",
    "胡斌",
    "郭雪",
    "何军",
    "高倩",
    "林峰",
    "罗佳",
]

REFUND_REASONS = ["damaged", "wrong_size", "late_delivery", "changed_mind"]
ORDER_STATUSES = ["completed", "completed", "completed", "completed", "completed", "completed", "cancelled", "returned"]

MONTHS_EN = ["January", "February", "March", "April", "May", "June"]

# The return policy the policy_choice questions quiz. Kept here so README and tests can quote it.
POLICY = {
    "return_window_days": 30,  # unopened items, full refund
    "electronics_window_days": 15,  # electronics, full refund
    "store_credit_until_days": 60,  # late returns get store credit until this day
    "defect_window_days": 90,  # defective items: refund or exchange
    "refund_business_days": 7,  # refund reaches the original payment method
    "return_link": "https://shop.example.com/returns",
    "free_shipping_over": 99,
}


def products_in(category: str) -> list[tuple]:
    """Products of one catalog category, in id order."""
    return [p for p in PRODUCTS if p[3] == category]
