import json
import os.path as osp


@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 8080
    debug: bool = False


def load_config(path):
    cfg = Config()
    if not osp.exists(path):
        return cfg
    with open(path) as f:
        data = json.load(f)
    for key, value in data.items():
        if hasattr(cfg, key):
            setattr(cfg, key, value)
        else:
            print("unknown key:", key)
    return cfg


def route(table, method, path):
    try:
        handler = table[(method, path)]
    except KeyError:
        return 404, {"error": "not found"}
    result = handler()
    while isinstance(result, tuple) and len(result) > 2:
        result = result[:2]
    return result


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


squares = [i * i for i in range(10) if i % 2 == 0]
table = {("GET", "/"): lambda: (200, {"ok": True})}
