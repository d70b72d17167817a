-- Fills a migrated ledger with :n purchases (and their grants) of 100,000 accounts, so load runs see a ledger of a
-- real app's size. Written once for SQLite and PostgreSQL: generated ids never meet the minted ones (prefix bulk-).
-- Usage: sed "s/:n/1000000/g" bulk_ledger.sql | sqlite3 ledger.sqlite   (or | psql URL)
INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment, quantity,
    purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token, signed_date, source, recorded_at)
SELECT 'bulk-' || g, 'bulk-' || g, 'bulk-account-' || (g % 100000), NULL,
    CASE WHEN g % 10 = 0 THEN 'com.example.iapkit.premium' ELSE 'com.example.iapkit.coins.100' END,
    CASE WHEN g % 10 = 0 THEN 'Non-Consumable' ELSE 'Consumable' END,
    'Sandbox', 1, 1700000000000 + g, NULL, NULL, NULL, 0, 'PURCHASED', NULL, 1700000000000 + g, 'bulk', 1700000000000 + g
FROM (WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :n) SELECT g FROM s) AS numbers;
INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at)
SELECT 'grant:' || transaction_id, account_id, 'coins', 100, transaction_id, recorded_at FROM purchases WHERE source = 'bulk' AND product_type = 'Consumable';
INSERT INTO balances (account_id, currency, amount)
SELECT account_id, 'coins', SUM(delta) FROM balance_entries WHERE entry_key LIKE 'grant:bulk-%' GROUP BY account_id;
