"""vLLM's own benchmark client on the perf rig (scripts/perf/clientAccuracy.ts runs it when
PERF_VLLM_REQUEST_FUNC is set): drives the mock server exactly as `vllm bench serve --backend vllm
--max-concurrency C --request-rate inf` does (one aiohttp session, a semaphore of C, every request
started at once) with vLLM's request function, loaded from the file the variable names (a vLLM
checkout's vllm/benchmarks/lib/endpoint_request_func.py; needs aiohttp, and what that file imports).
Fields read, as that file defines them at vLLM commit 02cfb534: RequestFuncInput(prompt, api_url,
prompt_len, output_len, model, ignore_eos, request_id) and RequestFuncOutput's success, start_time
(time.perf_counter() before session.post), ttft, itl (seconds) and error.

The session is serve.py's (vllm/benchmarks/serve.py at commit 009e6d4a): TCPConnector(limit and
limit_per_host = C, ttl_dns_cache=300, use_dns_cache, keepalive_timeout=60, enable_cleanup_closed,
force_close=False), trust_env, a 6-hour total timeout; every request a task under the semaphore.

Prints one JSON line per request: id, ok, start and first (epoch ms of the client's stamp and of its
first chunk), itl (ms). Usage: vllmClient.py URL CONCURRENCY REQUESTS OUTPUT INPUT ID_PREFIX
"""
import asyncio
import importlib.util
import json
import os
import sys
import time

import aiohttp


def load(path):
    spec = importlib.util.spec_from_file_location("vllm_request_func", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def main(url, c, n, out_len, in_len, prefix):
    mod = load(os.environ["PERF_VLLM_REQUEST_FUNC"])
    fields = getattr(mod.RequestFuncInput, "__dataclass_fields__", {})
    if "request_id" not in fields:
        sys.exit("this request function has no request_id field (it sends no x-request-id, so its requests cannot be matched to the server's record): use a vLLM checkout whose RequestFuncInput has one (as at commit 02cfb534)")
    # perf_counter (the client's clock) to epoch ms, as the mock records.
    offset_ms = time.time() * 1000 - time.perf_counter() * 1000
    connector = aiohttp.TCPConnector(limit=c, limit_per_host=c, ttl_dns_cache=300, use_dns_cache=True,
                                     keepalive_timeout=60, enable_cleanup_closed=True, force_close=False)
    semaphore = asyncio.Semaphore(c)
    async with aiohttp.ClientSession(connector=connector, trust_env=True,
                                     timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)) as session:

        async def one(i):
            inp = mod.RequestFuncInput(prompt=list(range(in_len)), api_url=url + "/v1/completions",
                                       prompt_len=in_len, output_len=out_len, model="mock-model",
                                       ignore_eos=True, request_id=f"{prefix}-{i}")
            async with semaphore:
                return i, await mod.async_request_openai_completions(inp, session)

        results = await asyncio.gather(*[one(i) for i in range(n)])
    for i, o in results:
        print(json.dumps({"id": f"{prefix}-{i}", "ok": bool(o.success),
                          "start": o.start_time * 1000 + offset_ms,
                          "first": (o.start_time + o.ttft) * 1000 + offset_ms,
                          "itl": [x * 1000 for x in o.itl], "error": (o.error or "")[:300]}))


if __name__ == "__main__":
    a = sys.argv
    asyncio.run(main(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6]))
