import math
from collections import defaultdict


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    if not xs:
        raise ValueError("mean of an empty sequence")
    return sum(xs) / len(xs)


def stdev(xs, ddof=1):
    m = mean(xs)
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - ddof)
    return math.sqrt(var)


def histogram(words):
    counts = defaultdict(int)
    for w in words:
        counts[w.lower()] += 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


class Running:
    def __init__(self):
        self.n = 0
        self.total = 0.0

    def add(self, x):
        self.n += 1
        self.total += x
        return self

    def value(self):
        return self.total / self.n if self.n else float("nan")


if __name__ == "__main__":
    data = [3, 1, 4, 1, 5, 9, 2, 6]
    print(f"mean={mean(data):.3f}", stdev(data))
    for word, n in histogram("the cat and the hat".split())[:3]:
        print(word, n)
