(define (fact n)
  (if (<= n 1)
      1
      (* n (fact (- n 1)))))
; factorial, map and a small association-list lookup

(define (my-map f xs)
  (cond ((null? xs) '())
        (else (cons (f (car xs)) (my-map f (cdr xs))))))

(define table '((apple . 3) (pear . 5) (plum . -2)))
(display (assq 'pear table))
(let loop ((i 0) (acc '()))
  (if (< i 10)
      (loop (+ i 1) (cons (* i i) acc))
      (reverse acc)))
(define v #(1 2.5 "three" #\a #t))
(string-append "hello, " "world")
