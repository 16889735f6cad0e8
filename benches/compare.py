#!/usr/bin/env python3
"""corral vs xgrammar vs llguidance vs outlines-core on the same inputs, one run.

    python3 benches/compare.py                       # default: Llama 3, 50 schemas (~10 min on 2 cores)
    python3 benches/compare.py --limit 100           # the run in benches/README.md
    python3 benches/compare.py --tokenizers all --limit 0 --json-instances 0   # everything

Each engine runs in its own worker process (benches/worker.py under benches/.venv/bin/python,
an address-space cap from --mem-gib via RLIMIT_AS) that is killed and restarted when an item
exceeds its time limit or when it dies. Workers of all engines stay up side by side and items
are interleaved (item k goes to the engines in an order rotated by k), so drift in machine
load spreads over all engines. See benches/README.md for what is measured.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import pickle
import platform
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import vocabs  # noqa: E402
import workloads as wl  # noqa: E402

ENGINES = ("corral", "xgrammar", "llguidance", "outlines")
VENV_PY = os.path.join(HERE, ".venv", "bin", "python")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Worker processes


def _kv(pairs: list[str]) -> dict:
    """["a=1", "b=schema"] -> {"a": 1, "b": "schema"} (values parsed as JSON when they are JSON)."""
    out = {}
    for p in pairs or []:
        k, _, v = p.partition("=")
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


class WorkerDied(Exception):
    pass


class Worker:
    """One engine's worker process; restarted after a timeout or a crash."""

    def __init__(self, engine: str, job: str, args, stderr_dir: str) -> None:
        self.engine = engine
        self.job = job
        self.args = args
        self.stderr_dir = stderr_dir
        self.proc: subprocess.Popen | None = None
        self.buf = b""
        self.compiled_gid: str | None = None
        self.setups: list[dict] = []
        self.peak_kb = 0
        self.base_kb = 0
        self.ready_kb = 0
        self.failed_starts = 0
        self.version = "?"
        self.starts = 0
        self.stderr_path = ""
        self.failed_gids: dict[str, dict] = {}

    # -- process control
    def start(self) -> dict | None:
        self.starts += 1
        self.stderr_path = os.path.join(self.stderr_dir, f"{self.engine}-{self.starts}.stderr")
        opts = {"xgrammar_nonstrict": self.args.xgrammar_nonstrict, "xgrammar_any_order": self.args.xgrammar_any_order,
                "corral_schema_options": _kv(self.args.corral_schema_option), "threads": self.args.threads,
                "corral_numpy_mask": self.args.corral_numpy_mask}
        cmd = [self.args.python, os.path.join(HERE, "worker.py"), self.engine, self.job,
               "--mem-gib", str(self.args.mem_gib), "--options", json.dumps(opts)]
        env = dict(os.environ)
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        _absolute_pythonpath(env)
        if self.args.threads:
            for k in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "MKL_NUM_THREADS"):
                env[k] = str(self.args.threads)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), start_new_session=True,
                                     cwd=HERE, env=env)
        self.buf = b""
        self.compiled_gid = None
        try:
            ev = self._read(self.args.setup_timeout)
        except (TimeoutError, WorkerDied) as e:
            self.kill()
            self.failed_starts += 1
            log(f"  {self.engine}: worker failed to start ({e}); stderr: {self.stderr_tail()}")
            return None
        if ev.get("ev") != "ready":
            self.kill()
            self.failed_starts += 1
            return None
        self.failed_starts = 0
        self.version = ev.get("version", "?")
        self.setups.append(ev)
        self.peak_kb = max(self.peak_kb, ev.get("rss_kb", 0))
        self.base_kb = max(self.base_kb, ev.get("base_rss_kb", 0))
        self.ready_kb = max(self.ready_kb, ev.get("ready_rss_kb", 0))
        return ev

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def hwm_kb(self) -> int:
        if not self.alive():
            return 0
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def kill(self) -> None:
        if self.proc is None:
            return
        self.peak_kb = max(self.peak_kb, self.hwm_kb())
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
        self.proc = None

    def close(self) -> None:
        if self.alive():
            self.peak_kb = max(self.peak_kb, self.hwm_kb())
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                pass
        self.kill()

    def stderr_tail(self, n: int = 400) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout:g} s")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                rc = self.proc.wait()
                sig = f" (signal {signal.Signals(-rc).name})" if rc < 0 else ""
                raise WorkerDied(f"exit status {rc}{sig}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    # -- one item
    def run(self, i: int, item: wl.Item) -> dict:
        res = self._run(i, item)
        if res.get("status") not in ("ok", None):
            self.failed_gids[item.gid] = res
        return res

    def _run(self, i: int, item: wl.Item) -> dict:
        failed = self.failed_gids.get(item.gid)
        if failed is not None:  # the same grammar failed before: not tried again
            return dict(failed, repeat=True)
        if not self.alive():
            if self.failed_starts >= 3:
                return {"status": "setup_failed"}
            if self.start() is None:
                return {"status": "setup_failed"}
        try:
            self.proc.stdin.write(f"{i}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.kill()
            return {"status": "crash", "phase": "send", "error": self.stderr_tail()}
        phase = "begin"
        try:
            ev = self._read(30)
            assert ev.get("ev") == "begin" and ev.get("i") == i, ev
            needs_compile = self.compiled_gid != item.gid
            phase = "compile" if needs_compile else "walk"
            ev = self._read(item.compile_timeout if needs_compile else self.args.walk_timeout)
            if ev.get("ev") == "compiled":
                self.compiled_gid = item.gid
                phase = "walk"
                ev = self._read(self.args.walk_timeout)
            assert ev.get("ev") == "result", ev
            self.peak_kb = max(self.peak_kb, ev.get("rss_kb", 0))
            if ev.get("status") != "ok":
                self.compiled_gid = None
            return ev
        except TimeoutError as e:
            self.kill()
            return {"status": "timeout", "phase": phase, "error": str(e)}
        except WorkerDied as e:
            tail = self.stderr_tail()
            self.kill()
            return {"status": "crash", "phase": phase, "error": f"{e}: {tail}"}


# ---------------------------------------------------------------------------------------------
# Statistics


def pct(xs: list[float], q: float) -> float | None:
    """Percentile with linear interpolation (numpy's default); None for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


class Stats:
    def __init__(self, engine: str, tok=None) -> None:
        self.engine = engine
        self.tok = tok
        self.compile_ms: dict[str, float] = {}
        self.ttfm_ms: list[float] = []
        self.fill_us: list[float] = []
        self.fill_warm_us: list[float] = []  # walks other than the first one after a compile
        self.fill_by_gid: dict[str, list[float]] = {}
        self.walks_by_gid: dict[str, list[tuple[str, list[float]]]] = {}  # (outcome, fill µs) per walk, in order
        self.ttfm_by_gid: dict[str, float] = {}
        self.accept_us: list[float] = []
        self.counts: dict[str, int] = {k: 0 for k in (
            "grammars", "compiled", "unsupported", "compile_error", "oom", "timeout_compile", "timeout_walk",
            "crash", "setup_failed", "instances", "walked", "passed", "false_reject", "eos_rejected",
            "accept_failed", "walk_error", "not_walked")}
        self.per_gid: dict[str, dict] = {}
        self.examples: dict[str, list[str]] = {}
        self.seen_gids: set[str] = set()

    def example(self, kind: str, text: str) -> None:
        lst = self.examples.setdefault(kind, [])
        if len(lst) < 5:
            lst.append(text)

    def add(self, item: wl.Item, res: dict) -> None:
        c = self.counts
        new = item.gid not in self.seen_gids
        self.seen_gids.add(item.gid)
        if new:
            c["grammars"] += 1
        c["instances"] += len(item.walks)
        status = res.get("status", "?")
        rec = self.per_gid.setdefault(item.gid, {"status": status, "outcomes": {}})
        if status == "ok":
            if "compile_ms" in res and item.gid not in self.compile_ms:
                self.compile_ms[item.gid] = res["compile_ms"]
                rec["compile_ms"] = round(res["compile_ms"], 3)
                c["compiled"] += 1
            if "ttfm_ms" in res and new:
                self.ttfm_ms.append(res["ttfm_ms"])
                self.ttfm_by_gid[item.gid] = res["ttfm_ms"]
            for k, w in enumerate(res.get("walks", [])):
                c["walked"] += 1
                fills = [x / 1e3 for x in w["fill_ns"]]
                self.fill_us.extend(fills)
                self.fill_by_gid.setdefault(item.gid, []).extend(fills)
                self.walks_by_gid.setdefault(item.gid, []).append((w["outcome"], fills))
                if fills:
                    # (Where a fill tail comes from: the slowest fill per grammar, and its walk and step.)
                    top = max(range(len(fills)), key=fills.__getitem__)
                    if fills[top] > rec.get("fill_max_us", -1.0):
                        rec["fill_max_us"] = round(fills[top], 1)
                        rec["fill_max_at"] = [k, top]
                if not (k == 0 and "compile_ms" in res):
                    self.fill_warm_us.extend(fills)
                self.accept_us.extend(x / 1e3 for x in w["accept_ns"])
                o = w["outcome"]
                rec["outcomes"][o] = rec["outcomes"].get(o, 0) + 1
                if o == "ok":
                    c["passed"] += 1
                elif o in ("false_reject", "eos_rejected", "accept_failed"):
                    c[o] += 1
                    where = self._where(item.walks[k], w.get("step", 0), w.get("token"))
                    rec.setdefault("failures", []).append({"walk": k, "outcome": o, "step": w.get("step"),
                                                           "token": w.get("token"), "at": where,
                                                           "error": w.get("error")})
                    self.example(o, f"{item.label} #{k} {where}" + (f": {w['error'][:120]}" if w.get("error") else ""))
                else:
                    c["walk_error"] += 1
                    self.example("walk_error", f"{item.label}: {w.get('error', '')[:160]}")
            return
        if rec["status"] == "ok" and status != "ok":
            rec["status"] = status
        if res.get("error") and not res.get("repeat"):
            rec["error"] = str(res["error"])[:300]
        c["not_walked"] += len(item.walks)
        if res.get("repeat"):
            return
        if status == "unsupported":
            if new:
                c["unsupported"] += 1
            self.example("unsupported", str(res.get("error", ""))[:160])
        elif status == "compile_error":
            if new:
                c["compile_error"] += 1
            self.example("compile_error", f"{item.label}: {str(res.get('error', ''))[:200]}")
        elif status == "oom":
            c["oom"] += 1
            self.example("oom", f"{item.label}: {str(res.get('error', ''))[:160]}")
        elif status == "timeout":
            c["timeout_compile" if res.get("phase") == "compile" else "timeout_walk"] += 1
            self.example("timeout", f"{item.label} ({res.get('phase')})")
        elif status == "crash":
            c["crash"] += 1
            self.example("crash", f"{item.label} ({res.get('phase')}): {str(res.get('error', ''))[:200]}")
        elif status == "setup_failed":
            c["setup_failed"] += 1

    def _where(self, ids: list[int], step: int, token: int | None) -> str:
        """The text before the failing token and the token itself, e.g. `..."a":` + `{"`."""
        if self.tok is None:
            return f"step {step} token {token}"
        before = self.tok.decode(ids[max(0, step - 10):step]).decode("utf-8", "replace")[-40:]
        tb = self.tok.token_bytes[token].decode("utf-8", "replace") if token is not None else "<EOS>"
        return f"step {step}: {before!r} + {tb!r}"

    def summary(self, worker: Worker | None, raw: bool = False) -> dict:
        comp = list(self.compile_ms.values())
        setups = [s["setup_ms"] for s in (worker.setups if worker else [])]
        return {
            "engine": self.engine,
            "version": worker.version if worker else "?",
            "counts": self.counts,
            "vocab_setup_ms_median": statistics.median(setups) if setups else None,
            "vocab_setup_ms": setups,
            "worker_starts": worker.starts if worker else 0,
            "compile_ms": {q: pct(comp, p) for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "ttfm_ms": {"p50": pct(self.ttfm_ms, 50), "p99": pct(self.ttfm_ms, 99)},
            "fill_us": {"n": len(self.fill_us), "p50": pct(self.fill_us, 50), "p90": pct(self.fill_us, 90),
                        "p99": pct(self.fill_us, 99), "p99.9": pct(self.fill_us, 99.9),
                        "max": max(self.fill_us) if self.fill_us else None,
                        "mean": statistics.fmean(self.fill_us) if self.fill_us else None},
            "fill_warm_us": {"n": len(self.fill_warm_us), "p50": pct(self.fill_warm_us, 50),
                             "p99": pct(self.fill_warm_us, 99), "p99.9": pct(self.fill_warm_us, 99.9),
                             "max": max(self.fill_warm_us) if self.fill_warm_us else None},
            "accept_us": {"n": len(self.accept_us), "p50": pct(self.accept_us, 50), "p99": pct(self.accept_us, 99)},
            "peak_rss_mb": (worker.peak_kb / 1024) if worker else None,
            "base_rss_mb": (worker.base_kb / 1024) if worker else None,
            "ready_rss_mb": (worker.ready_kb / 1024) if worker else None,
            "engine_peak_mb": ((worker.peak_kb - worker.base_kb) / 1024) if worker and worker.base_kb else None,
            "examples": self.examples,
            **({"raw": {"compile_ms": self.compile_ms, "ttfm_ms": self.ttfm_ms, "fill_us": self.fill_us,
                        "accept_us": self.accept_us}} if raw else {}),
        }


# ---------------------------------------------------------------------------------------------
# Running a workload


def run_workload(w: wl.Workload, tok, engines: list[str], args, tmp: str, keep: dict | None = None) -> dict:
    """Runs every item of `w` on every engine (interleaved); `keep`, when given, receives each
    engine's :class:`Stats` (per-grammar samples for callers such as grammar_bench.py)."""
    tokname = tok.name
    job = os.path.join(tmp, f"{tokname}-{w.name}.pickle")
    with open(job, "wb") as f:
        pickle.dump({"tokenizer": tokname,
                     "items": [{"gid": it.gid, "spec": it.spec, "walks": it.walks} for it in w.items]}, f)
    log(f"[{tokname}/{w.name}] {w.grammars} grammars, {w.instances} instances, {w.tokens} tokens")
    workers = {}
    for e in engines:  # started one after the other: setup times are not contended
        wk = Worker(e, job, args, tmp)
        ev = wk.start()
        if ev:
            log(f"  {e} {wk.version}: ready, vocabulary preprocessing {ev['setup_ms']:.0f} ms "
                f"(import {ev['import_ms']:.0f} ms, tokenizer load {ev['tokenizer_ms']:.0f} ms), "
                f"RSS {ev['base_rss_kb'] / 1024:.0f} MB baseline, {ev['ready_rss_kb'] / 1024:.0f} MB ready")
        workers[e] = wk
    stats = {e: Stats(e, tok) for e in engines}
    t0 = time.monotonic()
    n = len(w.items)
    for k, item in enumerate(w.items):
        order = engines[k % len(engines):] + engines[:k % len(engines)]
        line = []
        for e in order:
            res = workers[e].run(k, item)
            stats[e].add(item, res)
            st = res.get("status")
            if st == "ok":
                walks = res.get("walks", [])
                good = sum(1 for x in walks if x["outcome"] == "ok")
                cm = res.get("compile_ms")
                line.append(f"{e}:ok" + (f"({cm:.0f}ms)" if cm is not None else "") + (f" {good}/{len(walks)}" if walks else ""))
            else:
                line.append(f"{e}:{st}")
        if args.verbose or k % max(1, n // 20) == 0 or k == n - 1:
            log(f"  [{w.name} {k + 1}/{n} {time.monotonic() - t0:.0f}s] {item.label[:60]}: {' '.join(line)}")
    for wk in workers.values():
        wk.close()
    if keep is not None:
        keep.update(stats)
    return {
        "name": w.name, "title": w.title, "notes": w.notes, "grammars": w.grammars, "instances": w.instances,
        "tokens": w.tokens, "seconds": time.monotonic() - t0,
        "engines": {e: stats[e].summary(workers[e], args.raw_samples) for e in engines},
        "common_compile_ms": _common_compile(stats, engines),
        "per_grammar": {e: stats[e].per_gid for e in engines},
    }


def _common_compile(stats: dict[str, Stats], engines: list[str]) -> dict:
    """Compile, time-to-first-mask and fill percentiles over the grammars that every engine
    that compiled anything compiled (the set issue 3's targets are stated on)."""
    active = [e for e in engines if stats[e].compile_ms]
    if len(active) < 2:
        return {}
    common = sorted(set.intersection(*(set(stats[e].compile_ms) for e in active)))
    out = {"engines": active, "n": len(common)}
    for e in active:
        xs = [stats[e].compile_ms[g] for g in common]
        tt = [stats[e].ttfm_by_gid[g] for g in common if g in stats[e].ttfm_by_gid]
        fills = [x for g in common for x in stats[e].fill_by_gid.get(g, [])]
        out[e] = {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99),
                  "ttfm_p50": pct(tt, 50), "ttfm_p99": pct(tt, 99), "fill_n": len(fills),
                  **{f"fill_{q}": (pct(fills, float(q[1:])) if q != "max" else (max(fills) if fills else None))
                     for q in ("p50", "p99", "p99.9", "max")}}
    return out


def _absolute_pythonpath(env: dict) -> dict:
    """Children run in benches/: a relative PYTHONPATH (`PYTHONPATH=python`) would silently
    load the installed corral instead of the build it names, so its entries are made absolute."""
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e) if e else e for e in env["PYTHONPATH"].split(os.pathsep))
    return env


def run_apply(args, tmp: str) -> dict | None:
    out = os.path.join(tmp, "apply.json")
    cmd = [args.python, os.path.join(HERE, "apply_bench.py"), "--vocab", str(args.apply_vocab),
           "--batches", args.apply_batches, "--iters", str(args.apply_iters), "--threads", str(args.apply_threads),
           "--out", out]
    log(f"[apply] mask application on float32 logits, V={args.apply_vocab}, batches {args.apply_batches}")
    try:
        p = subprocess.run(cmd, cwd=HERE, timeout=args.apply_timeout, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True, env=_absolute_pythonpath(dict(os.environ)))
    except subprocess.TimeoutExpired:
        log("[apply] timed out")
        return {"error": f"timed out after {args.apply_timeout} s"}
    if p.returncode != 0 or not os.path.exists(out):
        err = p.stderr.decode("utf-8", "replace")[-600:]
        log(f"[apply] failed: {err}")
        return {"error": err}
    with open(out) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------
# Report


def machine() -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit = head + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    return {"nproc": os.cpu_count(), "cpu": cpu, "corral_commit": commit, "mem_mb": mem, "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_at_start": load}


def _f(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "–"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _ratio(v: float | None, ref: float | None) -> str:
    if v is None or ref is None or ref <= 0:
        return ""
    r = v / ref
    return f" (×{r:.2f})" if r < 10 else f" (×{r:,.0f})"


def workload_table(res: dict, engines: list[str]) -> list[str]:
    E = res["engines"]
    ref = E.get("corral")
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, get, ratio: bool = True, fmt=_f) -> None:
        cells = []
        r = get(ref) if ref else None
        for e in engines:
            v = get(E[e])
            cell = fmt(v) if not isinstance(v, str) else v
            if ratio and e != "corral" and not isinstance(v, str):
                cell += _ratio(v, r)
            cells.append(cell)
        rows.append((label, cells))

    cnt = lambda k: (lambda s: str(s["counts"][k]))  # noqa: E731
    row("version", lambda s: s["version"], False)
    row("vocabulary preprocessing ms (once per tokenizer)", lambda s: s["vocab_setup_ms_median"])
    row("grammars compiled / attempted", lambda s: f"{s['counts']['compiled']} / {s['counts']['grammars']}", False)
    row("unsupported · compile errors", lambda s: f"{s['counts']['unsupported']} · {s['counts']['compile_error']}", False)
    for q in ("p50", "p90", "p99", "max"):
        row(f"compile ms {q}", lambda s, q=q: s["compile_ms"][q])
    cc = res.get("common_compile_ms") or {}
    if cc.get("n") and len(cc.get("engines", [])) > 1 and cc["n"] < max(E[e]["counts"]["compiled"] for e in engines):
        for q in ("p50", "p90", "p99"):
            row(f"compile ms {q}, the {cc['n']} grammars all of {', '.join(cc['engines'])} compiled",
                lambda s, q=q: (cc.get(s["engine"]) or {}).get(q))
        for q in ("p50", "p99"):
            row(f"time to first mask ms {q}, the same {cc['n']} grammars",
                lambda s, q=q: (cc.get(s["engine"]) or {}).get(f"ttfm_{q}"))
        for q in ("p50", "p99", "p99.9", "max"):
            row(f"mask fill µs {q}, the same {cc['n']} grammars",
                lambda s, q=q: (cc.get(s["engine"]) or {}).get(f"fill_{q}"))
    row("time to first mask ms p50 (compile + 1st fill)", lambda s: s["ttfm_ms"]["p50"])
    row("time to first mask ms p99", lambda s: s["ttfm_ms"]["p99"])
    row("mask fills timed", lambda s: f"{s['fill_us']['n']:,}", False)
    for q in ("p50", "p90", "p99", "p99.9", "max", "mean"):
        row(f"mask fill µs {q}", lambda s, q=q: s["fill_us"][q])
    if any(E[e]["fill_warm_us"]["n"] for e in engines):
        row("warm fills (not in the first walk after a compile)", lambda s: f"{s['fill_warm_us']['n']:,}", False)
        for q in ("p50", "p99", "p99.9", "max"):
            row(f"warm mask fill µs {q}", lambda s, q=q: s["fill_warm_us"][q])
    row("accept µs p50", lambda s: s["accept_us"]["p50"])
    row("accept µs p99", lambda s: s["accept_us"]["p99"])
    row("instances passed / walked (of all)",
        lambda s: f"{s['counts']['passed']} / {s['counts']['walked']} ({s['counts']['instances']})", False)
    row("false rejections (token masked out)", cnt("false_reject"), False)
    row("EOS masked out at the end", cnt("eos_rejected"), False)
    row("accept refused an allowed token", cnt("accept_failed"), False)
    row("timeouts (compile · walk)", lambda s: f"{s['counts']['timeout_compile']} · {s['counts']['timeout_walk']}", False)
    row("crashes · out of memory · walk errors",
        lambda s: f"{s['counts']['crash']} · {s['counts']['oom']} · {s['counts']['walk_error']}", False)
    row("peak RSS MB (whole worker)", lambda s: s["peak_rss_mb"], False)
    row("baseline RSS MB (Python, numpy, torch if used, tokenizer)", lambda s: s["base_rss_mb"], False)
    row("engine memory MB: after vocabulary preprocessing − baseline",
        lambda s: (s["ready_rss_mb"] - s["base_rss_mb"]) if s["ready_rss_mb"] and s["base_rss_mb"] else None)
    row("engine memory MB: peak − baseline", lambda s: s["engine_peak_mb"])

    head = "| metric | " + " | ".join(engines) + " |"
    sep = "|---|" + "---:|" * len(engines)
    out = [head, sep]
    for label, cells in rows:
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def apply_table(ap: dict) -> list[str]:
    if not ap or "results" not in ap:
        return [f"Mask application failed: {(ap or {}).get('error', 'not run')}"]
    batches = list(ap["results"])
    names = list(ap["results"][batches[0]])
    head = "| kernel | " + " | ".join(f"B={b} median µs | B={b} p99 µs" for b in batches) + " |"
    out = [f"Applying a bitmask to float32 logits, V={ap['vocab']:,}, {ap['iters']} timed calls each, "
           f"torch {ap['torch']} with {ap['torch_threads']} intra-op thread(s), random mask ({ap['density']:.0%} allowed).",
           "", head, "|---|" + "---:|---:|" * len(batches)]
    for n in names:
        cells = []
        for b in batches:
            r = ap["results"][b][n]
            if "median_us" in r:
                cells += [_f(r["median_us"]), _f(r["p99_us"])]
            else:
                msg = r.get("skipped") or r.get("error", "?")
                cells += [f"n/a: {msg[:70]}", ""]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out


def report(tokname: str, tok, results: list[dict], apply_res: dict | None, engines: list[str], meta: dict) -> str:
    m = meta["machine"]
    lines = [f"## {tokname} ({tok.vocab_size:,} ids) — {meta['date']}", ""]
    lines.append(f"Machine: {m['nproc']} CPUs, {m['cpu']}, {m['mem_mb']:,} MB RAM, Python {m['python']}; "
                 f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'] or [])}.  ")
    lines.append(f"corral working tree: {m.get('corral_commit', '?')}.  ")
    lines.append(f"Command: `{meta['command']}`  ")
    lines.append(f"Limits: compile {meta['args']['compile_timeout']:g} s per schema, {meta['args']['grammar_timeout']:g} s "
                 f"per grammar, walks {meta['args']['walk_timeout']:g} s per item, {meta['args']['mem_gib']:g} GiB address space "
                 "per worker. Ratios are engine / corral (for times: > 1 means slower than corral).")
    lines.append("")
    for r in results:
        lines.append(f"### {r['title']} — {r['grammars']} grammars, {r['instances']} instances, {r['tokens']:,} tokens "
                     f"({r['seconds']:.0f} s)")
        lines.append("")
        for n in r["notes"]:
            lines.append(f"- {n}")
        if r["notes"]:
            lines.append("")
        lines += workload_table(r, engines)
        lines.append("")
        notes = []
        for e in engines:
            ex = r["engines"][e]["examples"]
            for kind in ("compile_error", "timeout", "crash", "oom", "false_reject", "eos_rejected", "accept_failed",
                         "walk_error", "unsupported"):
                if ex.get(kind):
                    notes.append(f"- {e} {kind.replace('_', ' ')}: " + "; ".join(f"`{x}`" for x in ex[kind][:3]))
        if notes:
            lines.append("<details><summary>examples of failures</summary>")
            lines.append("")
            lines += notes
            lines.append("")
            lines.append("</details>")
            lines.append("")
    if apply_res is not None:
        lines.append("### Mask application (CPU)")
        lines.append("")
        lines += apply_table(apply_res)
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default="llama3", help=f"comma list of {','.join(vocabs.NAMES)}, or 'all'")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--workloads", default="schema,json,gbnf", help="comma list of schema,json,gbnf")
    ap.add_argument("--limit", type=int, default=50, help="schemas to sample (0: all)")
    ap.add_argument("--subset", default="", help="comma list of JSONSchemaBench folders (default: all); "
                    f"known: {','.join(wl.schema_subsets())}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schemas", default="", help="comma list of schema files (relative to the JSONSchemaBench "
                    "folder, e.g. Github_easy/Github_easy---o1.json) instead of a sample")
    ap.add_argument("--max-instances", type=int, default=0, help="valid instances walked per schema (0: all)")
    ap.add_argument("--json-instances", type=int, default=200, help="instances for the any-JSON workload (0: all)")
    ap.add_argument("--gbnf-instances", type=int, default=100, help="instances per GBNF grammar (0: all)")
    ap.add_argument("--compile-timeout", type=float, default=10.0, help="seconds per schema compile")
    ap.add_argument("--grammar-timeout", type=float, default=120.0, help="seconds per any-JSON/GBNF grammar compile")
    ap.add_argument("--walk-timeout", type=float, default=60.0, help="seconds for the walks of one item")
    ap.add_argument("--setup-timeout", type=float, default=180.0)
    ap.add_argument("--mem-gib", type=float, default=8.0, help="RLIMIT_AS per worker (0: none)")
    ap.add_argument("--threads", type=int, default=0, help="cap engine threads (OMP/RAYON/xgrammar max_threads); 0: defaults")
    ap.add_argument("--xgrammar-nonstrict", action="store_true", help="xgrammar compile_json_schema(strict_mode=False)")
    ap.add_argument("--xgrammar-any-order", action="store_true", help="xgrammar compile_json_schema(any_order=True)")
    ap.add_argument("--corral-schema-option", action="append", default=[], metavar="KEY=VALUE",
                    help="keyword argument for corral.Grammar.from_json_schema, e.g. property_order=schema (repeatable)")
    ap.add_argument("--corral-numpy-mask", action="store_true",
                    help="give corral a numpy bitmask instead of a corral.allocate_token_bitmask tensor (its other "
                         "supported input; default: the torch tensor, what serving engines pass)")
    ap.add_argument("--no-apply", action="store_true", help="skip the mask-application benchmark")
    ap.add_argument("--apply-vocab", type=int, default=128256)
    ap.add_argument("--apply-batches", default="1,32")
    ap.add_argument("--apply-iters", type=int, default=200)
    ap.add_argument("--apply-threads", type=int, default=1)
    ap.add_argument("--apply-timeout", type=float, default=600)
    ap.add_argument("--python", default=VENV_PY if os.path.exists(VENV_PY) else sys.executable)
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="", help="suffix for the result file names")
    ap.add_argument("--raw-samples", action="store_true", help="put every timing sample into the JSON file")
    ap.add_argument("--verbose", "-v", action="store_true")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    toknames = list(vocabs.NAMES) if args.tokenizers == "all" else [t for t in args.tokenizers.split(",") if t]
    engines = [e for e in args.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES:
            raise SystemExit(f"unknown engine {e!r}")
    wnames = [x for x in args.workloads.split(",") if x]
    if args.python == sys.executable and not os.path.exists(VENV_PY):
        log(f"warning: {VENV_PY} not found; peers must be importable from {sys.executable}")
    date = _dt.date.today().isoformat()
    meta = {"date": date, "machine": machine(), "args": vars(args),
            "command": "python3 benches/compare.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    os.makedirs(args.out_dir, exist_ok=True)

    # Inputs shared by all tokenizers: the schema sample and the instance pool.
    files = wl.schema_files([s for s in args.subset.split(",") if s] or None)
    sample = files
    if args.schemas:
        sample = [os.path.join(wl.SCHEMA_DIR, x) for x in args.schemas.split(",") if x]
    elif args.limit and args.limit < len(files):
        sample = sorted(random.Random(args.seed).sample(files, args.limit))
    pool = wl.instance_pool(wl.schema_files([s for s in args.subset.split(",") if s] or None)) \
        if ("json" in wnames or "gbnf" in wnames) else []

    apply_res = None
    if not args.no_apply:
        with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
            apply_res = run_apply(args, tmp)

    reports = []
    for tokname in toknames:
        t0 = time.monotonic()
        tok = vocabs.load(tokname)
        tk = wl.Tokenized(tok)
        built = []
        for name in wnames:
            if name == "schema":
                built.append(wl.schema_workload(tk, sample, args.max_instances, args.compile_timeout))
                built[-1].notes.insert(0, f"{len(sample)} of {len(files)} schemas (seed {args.seed}"
                                       + (f", subsets {args.subset}" if args.subset else "") + "); "
                                       "every valid test instance walked; schemas without one are compiled only")
            elif name == "json":
                built.append(wl.json_workload(tk, pool, args.json_instances, args.seed, args.grammar_timeout))
            elif name == "gbnf":
                built.append(wl.gbnf_workload(tk, pool, args.gbnf_instances, args.seed, args.grammar_timeout))
            else:
                raise SystemExit(f"unknown workload {name!r}")
        log(f"[{tokname}] inputs tokenized in {time.monotonic() - t0:.1f} s")
        results = []
        with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
            for w in built:
                results.append(run_workload(w, tok, engines, args, tmp))
        md = report(tokname, tok, results, apply_res, engines, meta)
        base = os.path.join(args.out_dir, f"{date}-{tokname}{('-' + args.tag) if args.tag else ''}")
        with open(base + ".md", "w", encoding="utf-8") as f:
            f.write(md + "\n")
        with open(base + ".json", "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "tokenizer": {"name": tokname, "vocab_size": tok.vocab_size, "eos_ids": tok.eos_ids},
                       "workloads": results, "apply": apply_res}, f, indent=1, default=str)
        print(md, flush=True)
        log(f"[{tokname}] wrote {base}.md and .json")
        reports.append(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
