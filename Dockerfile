# Build the wheel, then install only the wheel: the image runs the package as a user's
# `pip install` would, migrations and prompts inside it, no source tree beside it.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /build
COPY pyproject.toml README.md ./
COPY app ./app
COPY registries ./registries
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/toolloop
RUN groupadd --system toolloop && useradd --system --gid toolloop --home /srv/toolloop toolloop
COPY --from=build /dist /dist
# With the `otel` extra: the image exports traces when OTEL_EXPORTER_OTLP_ENDPOINT is set;
# with `temporal`: it runs `toolloop worker` and TOOLLOOP_EXECUTOR=temporal.
RUN pip install "$(ls /dist/*.whl)[otel,temporal]" && rm -rf /dist
COPY registries/example.yml ./registries/example.yml
RUN mkdir -p /srv/toolloop/data && chown toolloop:toolloop /srv/toolloop/data

USER toolloop
ENV TOOLLOOP_HOST=0.0.0.0 \
    TOOLLOOP_PORT=8000 \
    TOOLLOOP_REGISTRIES=/srv/toolloop/registries/example.yml \
    TOOLLOOP_DATABASE_URL=sqlite+aiosqlite:////srv/toolloop/data/toolloop.db
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["toolloop", "serve"]
