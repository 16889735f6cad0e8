SELECT c.customer_id, c.name, COUNT(o.order_id) AS orders, SUM(o.total) AS revenue
FROM customers AS c
LEFT JOIN orders o ON o.customer_id = c.customer_id AND o.status <> 'cancelled'
WHERE c.created_at >= '2024-01-01' AND c.country IN ('DE', 'FR', 'NL')
GROUP BY c.customer_id, c.name
HAVING SUM(o.total) > 1000
ORDER BY revenue DESC, c.name ASC
LIMIT 20;
