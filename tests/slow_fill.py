"""A grammar and a text whose fill runs far past 1 ms: the fill-budget tests' input.

Every split of the text into runs of ``[a-z ]`` is a parse (Earley's worst case). After one
sentence the fill takes about 1 ms on warm caches (its runs in one state share a cache key),
so the text repeats it: about 0.1 s without a budget, over corral's built-in vocabulary and
the engines' test vocabularies alike.
"""

AMBIGUOUS = 'root ::= [a-z ]* (root | "")'
SLOW_TEXT = " the cat sat on the mat and then it went away to sleep for a while" * 8
