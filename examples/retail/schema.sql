-- shop.db: the retail sample domain's reporting database (SQLite).
-- Built by build_db.py from this schema plus seeded rows; SQL report requests run against it.
CREATE TABLE stores (
    store_id   INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    city       TEXT NOT NULL
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    category   TEXT NOT NULL,          -- kitchen | stationery | apparel | electronics | home | food
    unit_price REAL NOT NULL           -- yuan
);
CREATE TABLE orders (
    order_id   INTEGER PRIMARY KEY,
    store_id   INTEGER NOT NULL REFERENCES stores(store_id),
    customer   TEXT NOT NULL,
    order_date TEXT NOT NULL,          -- ISO date, 2026-01-01 .. 2026-06-30
    status     TEXT NOT NULL           -- completed | cancelled | returned
);
CREATE TABLE order_items (
    order_id   INTEGER NOT NULL REFERENCES orders(order_id),
    product_id INTEGER NOT NULL REFERENCES products(product_id),
    qty        INTEGER NOT NULL,
    unit_price REAL NOT NULL,          -- price paid per unit (yuan)
    PRIMARY KEY (order_id, product_id)
);
CREATE TABLE refunds (
    refund_id   INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL REFERENCES orders(order_id),
    refund_date TEXT NOT NULL,         -- ISO date
    amount      REAL NOT NULL,         -- yuan
    reason      TEXT NOT NULL          -- damaged | wrong_size | late_delivery | changed_mind
);
CREATE INDEX orders_store_date ON orders(store_id, order_date);
CREATE INDEX refunds_order ON refunds(order_id);
-- Each order's shipment (the agent desk's multi-step tickets look it up): built from a random stream
-- of its own, after the tables above, so adding it changed none of their rows.
CREATE TABLE shipments (
    order_id     INTEGER PRIMARY KEY REFERENCES orders(order_id),
    carrier      TEXT NOT NULL,
    shipping_fee REAL NOT NULL,        -- yuan the customer paid for delivery; 0 = free shipping
    status       TEXT NOT NULL         -- pending | shipped | delivered | cancelled
);
