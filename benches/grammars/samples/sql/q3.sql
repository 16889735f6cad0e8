SELECT e.name, e.salary, d.name AS department
FROM employees e
JOIN departments d USING (department_id)
WHERE e.salary > (SELECT AVG(salary) FROM employees WHERE department_id = e.department_id)
  AND NOT EXISTS (SELECT 1 FROM terminations t WHERE t.employee_id = e.id)
UNION ALL
SELECT name, salary, 'contractor' FROM contractors WHERE active = TRUE
ORDER BY 2 DESC
LIMIT 50 OFFSET 100;
