#!/usr/bin/python3
"""End-to-end check of the metrics pipeline against a real Prometheus server.

Starts a throwaway Prometheus on loopback that scrapes the router, drafter and verifier (or, with
--fake-exporter, starts metrics_fake_exporter to stand in for them), waits until every target has
been scraped a few times, then:
  * evaluates every PromQL expression of deploy/grafana/splitspec.json through the HTTP API
    (each must evaluate without error),
  * checks that a query for accepted draft tokens returns a value > 0,
  * optionally (--range-out FILE) saves query_range results of every panel for
    deploy/grafana/render_dashboard.py.
Prometheus (and the fake exporter) are stopped by PID on exit. Exit status 0 means all passed.

ctest runs it against the real services (metrics_integration_test,
PrometheusScrapeTest.DashboardQueriesEvaluateAgainstRealServices), which starts them on free ports
and keeps requests flowing while this script runs. By hand, against running services (a job may
list several comma-separated targets, e.g. two drafters):
  tests/integration/prometheus_scrape.py --router 127.0.0.1:9400 --drafter 127.0.0.1:9401 \\
      --verifier 127.0.0.1:9402
or against synthetic metrics:
  tests/integration/prometheus_scrape.py --fake-exporter build/bin/metrics_fake_exporter
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS = ("router", "drafter", "verifier")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, path, params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # Prometheus answers bad queries with 400 and a JSON body
        return json.load(e)


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")


def dashboard_queries(path, rate_interval):
    """(panel title, refId, expr, legendFormat) for every target, Grafana variables substituted."""
    with open(path) as f:
        dashboard = json.load(f)
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            expr = expr.replace("$__rate_interval", rate_interval).replace("$pool", ".*")
            out.append((panel["title"], target.get("refId", "A"), expr, target.get("legendFormat", "")))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            # label_values(metric, label) is Grafana's, not PromQL: check the metric exists.
            definition = var["definition"]
            metric = definition[definition.index("(") + 1:definition.index(",")].strip()
            out.append((f"variable {var['name']}", "-", metric, ""))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", default="prometheus")
    ap.add_argument("--dashboard", default=os.path.join(REPO, "deploy/grafana/splitspec.json"))
    ap.add_argument("--fake-exporter", help="path to metrics_fake_exporter; started on free ports")
    for job, port in zip(JOBS, (9400, 9401, 9402)):
        ap.add_argument(f"--{job}", default=f"127.0.0.1:{port}",
                        help=f"{job} metrics host:port (comma-separated for several)")
    ap.add_argument("--scrapes", type=int, default=5, help="scrapes of each target to wait for")
    ap.add_argument("--run-seconds", type=float, default=0,
                    help="keep scraping this long before querying (for range plots)")
    ap.add_argument("--range-out", help="write query_range results of every panel to this JSON file")
    ap.add_argument("--rate-interval", default="30s",
                    help="what $__rate_interval stands for (a short run renders better with 10s)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="splitspec_prom_")
    procs = []

    def stop_all():
        for p in reversed(procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    failures = []
    try:
        targets = {job: [t for t in getattr(args, job).split(",") if t] for job in JOBS}
        if args.fake_exporter:
            ports = [free_port() for _ in JOBS]
            targets = {job: [f"127.0.0.1:{port}"] for job, port in zip(JOBS, ports)}
            log = open(os.path.join(tmp, "exporter.log"), "w")
            procs.append(subprocess.Popen(
                [args.fake_exporter, "--router-port", str(ports[0]), "--drafter-port", str(ports[1]),
                 "--verifier-port", str(ports[2])], stdout=log, stderr=subprocess.STDOUT))
        n_targets = sum(len(t) for t in targets.values())

        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
            for job, job_targets in targets.items():
                listed = ", ".join(f"'{t}'" for t in job_targets)
                f.write(f"  - job_name: splitspec-{job}\n    static_configs:\n"
                        f"      - targets: [{listed}]\n        labels:\n          service: {job}\n")
        prom_port = free_port()
        base = f"http://127.0.0.1:{prom_port}"
        log = open(os.path.join(tmp, "prometheus.log"), "w")
        procs.append(subprocess.Popen(
            [args.prometheus, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{prom_port}",
             f"--storage.tsdb.path={os.path.join(tmp, 'data')}"], stdout=log, stderr=subprocess.STDOUT))

        def ready():
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ready, 60, "Prometheus /-/ready")

        def scraped_enough():
            r = api(base, "/api/v1/query",
                    {"query": f'count_over_time(up{{job=~"splitspec-.*"}}[5m]) >= {args.scrapes}'
                              f' and up{{job=~"splitspec-.*"}} == 1'})
            return r.get("status") == "success" and len(r["data"]["result"]) == n_targets
        wait_for(scraped_enough, 60 + args.scrapes * 2, f"{args.scrapes} good scrapes of {targets}")
        if args.run_seconds > 0:
            time.sleep(args.run_seconds)
        rate_interval = args.rate_interval

        def accepted_tokens():
            r = api(base, "/api/v1/query", {"query": "sum(splitspec_spec_decode_num_accepted_tokens_total)"})
            result = r.get("data", {}).get("result") if r.get("status") == "success" else None
            return float(result[0]["value"][1]) if result else 0.0
        # Traffic may still be warming up: poll (bounded) until a scrape has seen accepted drafts.
        try:
            wait_for(lambda: accepted_tokens() > 0, 30, "accepted draft tokens > 0")
        except TimeoutError:
            pass
        value = accepted_tokens()
        print(f"accepted draft tokens: {value:g}")
        if not value > 0:
            failures.append("sum(splitspec_spec_decode_num_accepted_tokens_total) is not > 0")

        ranges = []
        end = time.time()
        for title, ref, expr, legend in dashboard_queries(args.dashboard, rate_interval):
            r = api(base, "/api/v1/query", {"query": expr})
            ok = r.get("status") == "success"
            n = len(r["data"]["result"]) if ok else 0
            print(f"{'ok  ' if ok else 'FAIL'} {n:3d} series  {title} [{ref}]")
            if not ok:
                failures.append(f"{title} [{ref}]: {r.get('error')}  expr: {expr}")
            elif n == 0:
                print(f"      (no data yet for: {expr})")
            if args.range_out and ref != "-":
                rr = api(base, "/api/v1/query_range",
                         {"query": expr, "start": end - max(120, args.run_seconds + 60), "end": end, "step": "2s"})
                ranges.append({"title": title, "refId": ref, "expr": expr, "legendFormat": legend,
                               "result": rr.get("data", {}).get("result", [])})
        if args.range_out:
            with open(args.range_out, "w") as f:
                json.dump(ranges, f)
            print(f"wrote {args.range_out}")
    except Exception as e:  # report, stop the processes, fail
        failures.append(f"{type(e).__name__}: {e}")
        for name in ("prometheus.log", "exporter.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                with open(path) as f:
                    sys.stderr.write(f"--- {name} (tail) ---\n" + "".join(f.readlines()[-20:]))
    finally:
        stop_all()

    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
