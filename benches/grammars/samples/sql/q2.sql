WITH monthly AS (
  SELECT product_id, SUM(quantity * unit_price) AS sales
  FROM order_items
  WHERE shipped_at BETWEEN '2025-01-01' AND '2025-01-31'
  GROUP BY product_id
)
SELECT p.name, m.sales,
  CASE WHEN m.sales > 10000 THEN 'top' WHEN m.sales > 1000 THEN 'mid' ELSE 'low' END AS tier
FROM monthly m
INNER JOIN products p ON p.id = m.product_id
WHERE p.discontinued IS NOT NULL OR p.name LIKE 'Pro%'
ORDER BY m.sales DESC;
UPDATE products SET price = price * 1.05, updated_at = NOW() WHERE category_id = 7;
DELETE FROM sessions WHERE last_seen < '2025-06-01';
INSERT INTO audit_log (actor, action, at) VALUES ('system', 'price update', NOW()), ('system', 'cleanup', NOW());
