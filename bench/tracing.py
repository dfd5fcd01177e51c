"""Tracing's cost: the engine's per-call figure and a one-call plan over HTTP,
untraced and with every span exported over OTLP/HTTP to a sink on 127.0.0.1
(`bench.otlp_sink`, another process, which accepts and discards).

Per call: the engine of target 1 (no persistence) running a plan of 1,000
no-op calls inside a run span, untraced and with `execute_tool` spans batched
to the OTLP exporter (`OTEL_*` defaults). The CPU is this process's, the
exporter's thread included. Over HTTP: two servers as `toolloop serve` builds
them, one with OTEL_EXPORTER_OTLP_ENDPOINT set, driven in turn by the same
`wrk` run as section 4's one-call plan.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

from app.engine.engine import Engine
from bench import harness
from bench.http import _body, _free_port, _script, _serve_args, _server, _wrk
from bench.stats import Sample, Section, cpu_clock, ratios, rounds

COMMAND = "BENCH_ONLY=tracing .venv/bin/python -m bench"
CALLS = 1000
DURATION_S = 3 if harness.QUICK else 10
HTTP_ROUNDS = 2 if harness.QUICK else 4


async def measure() -> Section:
    section = Section("Tracing (OpenTelemetry)", COMMAND)
    sink_port = _free_port()
    with tempfile.TemporaryDirectory(prefix="toolloop-tracing-") as scratch:
        directory = Path(scratch)
        async with AsyncExitStack() as running:
            await running.enter_async_context(
                _server(
                    [sys.executable, "-m", "bench.otlp_sink", str(sink_port)],
                    sink_port,
                    directory / "sink.log",
                    probe=False,
                )
            )
            endpoint = f"http://127.0.0.1:{sink_port}"
            await _per_call(section, endpoint)
            if shutil.which("wrk") is None:
                section.notes.append("wrk is not installed: HTTP figures skipped")
            else:
                await _http(section, endpoint, directory, running)
    return section


async def _per_call(section: Section, endpoint: str) -> None:
    # Imported here: `python -m bench` imports every section, and the others
    # measure a process with nothing of OpenTelemetry's SDK loaded, as the service's.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from app.observability.otel_tracing import OtelTracing

    built = harness.contract()
    plain = harness.engine(built)
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    tracing = OtelTracing(provider)
    sinks = harness.NullSinks()
    traced = Engine(built, receipts=sinks, audit=sinks, pipeline_factory=tracing.pipeline_factory())
    plan, admitted = harness.sequential_plan(built, "noop", CALLS)

    async def untraced_plan() -> float:
        started = cpu_clock()
        await harness.run_sequential(plain, built, plan, admitted)
        return (cpu_clock() - started) / CALLS * 1e6

    async def traced_plan() -> float:
        started = cpu_clock()
        with tracing.tracer.start_as_current_span("run sequential"):
            await harness.run_sequential(traced, built, plan, admitted)
        provider.force_flush()  # the export's CPU is counted with the calls it carries
        return (cpu_clock() - started) / CALLS * 1e6

    subjects = {"engine, untraced": untraced_plan, "engine, traced": traced_plan}
    for subject in subjects.values():
        await subject()
    samples = await rounds(subjects, 8 if harness.QUICK else 25, "µs/call (CPU)")
    await plain.aclose()
    await traced.aclose()
    provider.shutdown()
    section.add(samples)
    untraced, traced_sample = samples["engine, untraced"], samples["engine, traced"]
    section.samples["engine: traced - untraced, per call"] = Sample(
        "µs/call (CPU)",
        [b - a for a, b in zip(untraced.values, traced_sample.values, strict=True)],
    )
    section.samples["engine: traced / untraced"] = ratios(traced_sample, untraced)


async def _http(section: Section, endpoint: str, directory: Path, running: AsyncExitStack) -> None:
    script = _script(directory, "one", _body(1))
    servers = {}
    for name, environment in (
        ("untraced", {}),
        (
            "traced",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "toolloop-bench"},
        ),
    ):
        port = _free_port()
        url = f"sqlite+aiosqlite:///{directory / f'{name}.db'}"
        command = [sys.executable, "-m", "app.cli", *_serve_args(port, url)]
        servers[name] = await running.enter_async_context(
            _server(command, port, directory / f"{name}.log", environment=environment)
        )
    for base, _ in servers.values():
        await asyncio.to_thread(_wrk, f"{base}/plans/sequential", script, 2)
    samples: dict[str, dict[str, Sample]] = {name: {} for name in servers}
    units = {"rps": "req/s", "p50": "ms", "p99": "ms", "cpu": "µs/req (CPU)"}
    for index in range(HTTP_ROUNDS):
        order = list(servers)[index % 2 :] + list(servers)[: index % 2]
        for name in order:
            base, pid = servers[name]
            figures = await asyncio.to_thread(
                _wrk, f"{base}/plans/sequential", script, DURATION_S, pid
            )
            for key, value in figures.items():
                if key in units:
                    samples[name].setdefault(key, Sample(units[key])).values.append(value)
    for name, kept in samples.items():
        for key, sample in kept.items():
            section.samples[f"HTTP one-call plan, {name}: {key}"] = sample
    section.samples["HTTP: traced / untraced req/s"] = ratios(
        samples["traced"]["rps"], samples["untraced"]["rps"]
    )
    if "cpu" in samples["traced"] and "cpu" in samples["untraced"]:
        section.samples["HTTP: traced / untraced CPU per request"] = ratios(
            samples["traced"]["cpu"], samples["untraced"]["cpu"]
        )
