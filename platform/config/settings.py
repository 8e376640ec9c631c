"""Settings of the platform. Everything that differs between machines comes from the environment.

The embedded stack (deploy/stack.py) and the test suite set DATABASE_URL and REDIS_URL to the
services they start; production sets them to managed ones and DJANGO_ENV=production.
"""

import os
import sys
from pathlib import Path

import dj_database_url

from config.logs import logging_config

PLATFORM_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PLATFORM_DIR.parent
FRONTEND_DIR = REPO_DIR / "frontend"

ENVIRONMENT = os.environ.get("DJANGO_ENV", "development")
INSECURE_DEFAULT_SECRET_KEY = "django-insecure-development-only-never-use-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", INSECURE_DEFAULT_SECRET_KEY)
DEBUG = os.environ.get("DJANGO_DEBUG", "1" if ENVIRONMENT == "development" else "0") == "1"
# This machine's names outside production, debug pages or not (`make run` serves plain ones unless asked).
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS",
                                           "" if ENVIRONMENT == "production" else "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "ninja",  # its bundled Swagger UI assets: /api/docs loads nothing from a CDN
    "axes",
    "accounts",
    "promptsets",
    "runs",
    "proofs",
    "pipelines",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.logs.RunLogMiddleware",
    # Last, as django-axes asks: it refuses a locked-out client's login attempts.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: counts failed logins and refuses while locked out
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one user name from one
# address, that pair is locked out for AXES_COOLOFF_HOURS; a successful login resets the count.
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("AXES_COOLOFF_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client's address is REMOTE_ADDR (django-ipware is not installed): uvicorn rewrites it from
# X-Forwarded-For only for connections from FORWARDED_ALLOW_IPS, the proxy (docs/operations/index.md), so a
# client cannot choose the address it is counted under.

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [FRONTEND_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.context_processors.platform",
            ],
            # duration, timestamp, measured, file_size: one way of writing them on every page.
            "builtins": ["runs.templatetags.formatting"],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5433/leanrl")
if not DATABASE_URL.startswith(("postgres://", "postgresql://")):
    sys.exit(f"DATABASE_URL must be a PostgreSQL URL (postgres://user@host:port/db), got {DATABASE_URL!r}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"  # psycopg 3
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6380/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 5000, "expiry": 60},
    }
}
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = os.environ.get("CELERY_TASK_ALWAYS_EAGER") == "1"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Where the trainer runs and what it talks to.
RAY_ADDRESS = os.environ.get("RAY_ADDRESS", "http://127.0.0.1:8265")
LEAN_SERVER_URL = os.environ.get("LEAN_SERVER_URL", "http://127.0.0.1:12332")
LEAN_SERVER_API_KEY = os.environ.get("LEAN_SERVER_API_KEY") or None
LEAN_SERVER_IS_STANDIN = os.environ.get("LEAN_SERVER_IS_STANDIN", "1") == "1"
ARTIFACTS_DIR = Path(os.environ.get("ARTIFACTS_DIR", REPO_DIR / "var" / "artifacts"))
TRAINER_PYTHON = os.environ.get("TRAINER_PYTHON", sys.executable)
# Folders on the server that people may import a dataset folder from (separated like PATH); none by default,
# so no one can make the server read a path of their choosing.
PROMPTSET_IMPORT_ROOTS = [Path(p) for p in os.environ.get("PROMPTSET_IMPORT_ROOTS", "").split(os.pathsep) if p]
# An autoscaling cluster (KubeRay with minReplicas 0) may have no GPU worker alive when a run is dispatched.
# These say how far it grows: GPUs and CPUs in all with every worker group at its maxReplicas (and the head).
# Set them and dispatch checks a run against that ceiling, not the live nodes' totals, and submits it: Ray keeps
# a one-process run's job pending, or a run of actors' placement group, and the autoscaler adds the nodes
# (docs/operations/sizing.md). Unset (the default): the cluster is what is alive now.
RAY_AUTOSCALING_MAX_GPUS = float(os.environ["RAY_AUTOSCALING_MAX_GPUS"]) if os.environ.get("RAY_AUTOSCALING_MAX_GPUS") else None
RAY_AUTOSCALING_MAX_CPUS = float(os.environ["RAY_AUTOSCALING_MAX_CPUS"]) if os.environ.get("RAY_AUTOSCALING_MAX_CPUS") else None
# The GPUs of the autoscaling cluster's largest worker: a run's GPUs must fit one node (runs.cluster._node_problems).
RAY_AUTOSCALING_MAX_GPUS_PER_NODE = (float(os.environ["RAY_AUTOSCALING_MAX_GPUS_PER_NODE"])
                                     if os.environ.get("RAY_AUTOSCALING_MAX_GPUS_PER_NODE") else None)
# Sent with every job as Ray's RAY_JOB_STOP_WAIT_TIME_S: how long Ray waits after a stop's SIGTERM before it
# SIGKILLs the job (Ray's default, 3 s, is shorter than tearing vLLM down or leaving a collective). The trainer
# publishes its cancelled end within it (trainer/run/lifecycle.py: stop_deadline_s).
RAY_JOB_STOP_WAIT_TIME_S = int(os.environ.get("RAY_JOB_STOP_WAIT_TIME_S", "60"))
# Every call to Ray's head gives up after this many seconds: a slow head must not stall a worker or the sweeper.
RAY_CALL_TIMEOUT_S = float(os.environ.get("RAY_CALL_TIMEOUT_S", "10"))
# The sweeper (manage.py sweep_runs): how often it looks, and how long a run may wait in each state
# before it acts (re-dispatch a queued run; adopt or fail a starting one; end a run whose job ended).
SWEEP_EVERY_S = float(os.environ.get("SWEEP_EVERY_S", "5"))
SWEEP_QUEUED_AFTER_S = float(os.environ.get("SWEEP_QUEUED_AFTER_S", "30"))
SWEEP_STARTING_AFTER_S = float(os.environ.get("SWEEP_STARTING_AFTER_S", "60"))
SWEEP_ENDED_JOB_GRACE_S = float(os.environ.get("SWEEP_ENDED_JOB_GRACE_S", "15"))
# The back-off of a run's automatic retries after an infrastructure failure (runs.models.retry_delay_s): the first
# waits RUN_RETRY_FIRST_DELAY_S, each next one twice as long, none longer than RUN_RETRY_MAX_DELAY_S.
RUN_RETRY_FIRST_DELAY_S = float(os.environ.get("RUN_RETRY_FIRST_DELAY_S", "30"))
RUN_RETRY_MAX_DELAY_S = float(os.environ.get("RUN_RETRY_MAX_DELAY_S", "600"))
# An upload being staged or checked whose worker wrote no progress for this long is ended as failed (its
# worker died: killed, redeployed, out of memory); the sweeper looks on each pass.
UPLOAD_STALLED_AFTER_S = float(os.environ.get("UPLOAD_STALLED_AFTER_S", "600"))
# The cpu-demo preset's warm-started model (built by the embedded stack; unset elsewhere).
WARM_START_MODEL = os.environ.get("LEANRL_WARM_START_MODEL") or None
WARM_START_STATUS = os.environ.get("LEANRL_WARM_START_STATUS") or None
# The compile caches handed to every run's job (vLLM's, and torch inductor's, which holds vLLM's compiled graphs on
# CPU): runs after the first (and the cpu-demo's first, whose cache the warm start's builder fills) load compiled
# graphs instead of compiling for a minute or more. Unset: each worker's defaults.
COMPILE_CACHE_ENVIRONMENT = {name: os.environ[name] for name in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR")
                             if os.environ.get(name)}
# Fair sharing (runs/scheduling.py): what a person without a Quota row may hold at once.
RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = int(os.environ.get("RUN_QUOTA_DEFAULT_CONCURRENT_RUNS", "2"))
RUN_QUOTA_DEFAULT_GPUS = int(os.environ.get("RUN_QUOTA_DEFAULT_GPUS", "8"))
# Trainer-side Redis URL: the address Ray workers use to reach Redis (may differ from the web's).
TRAINER_REDIS_URL = os.environ.get("TRAINER_REDIS_URL", REDIS_URL)
# Ray's dashboard as browsers reach it (the run page links each run's job there); empty: no link.
RAY_DASHBOARD_URL = os.environ.get("RAY_DASHBOARD_URL", RAY_ADDRESS)
# Experiment trackers' settings, passed to every trainer job in its environment (never its command
# line or config): W&B's key, mode and server, MLflow's tracking server and credentials.
TRACKING_ENVIRONMENT_NAMES = ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_ENTITY", "MLFLOW_TRACKING_URI",
                              "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
TRACKING_ENVIRONMENT = {name: os.environ[name] for name in TRACKING_ENVIRONMENT_NAMES if os.environ.get(name)}
# Prometheus scrapes /metrics with this bearer token; without one, only a staff login can read it.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN") or None
# How long a final run's event stream stays in Redis (for late events) before the ingester deletes it.
EVENT_STREAM_GRACE_S = float(os.environ.get("EVENT_STREAM_GRACE_S", "600"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [FRONTEND_DIR / "dist", FRONTEND_DIR / "static"]
# The embedded stack serves static files from the ASGI app; production puts them behind a web server.
SERVE_STATIC = os.environ.get("SERVE_STATIC", "0" if ENVIRONMENT == "production" else "1") == "1"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", REPO_DIR / "var" / "static"))
# The docs site, built from docs/ by `make docs` (MkDocs), served under /docs/ (config/docs.py) so the pages'
# help links (config.context_processors: docs_url) reach the guide on any deployment that built it.
DOCS_SITE_DIR = Path(os.environ.get("DOCS_SITE_DIR", REPO_DIR / "site"))
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # larger uploads stream to a temporary file

# One JSON object per line with the run it concerns (config/logs.py); plain text for a terminal.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json" if ENVIRONMENT == "production" else "text")
if LOG_FORMAT not in ("json", "text"):
    sys.exit(f"LOG_FORMAT must be 'json' or 'text', got {LOG_FORMAT!r}")
LOGGING = logging_config(LOG_FORMAT, os.environ.get("LOG_LEVEL", "INFO"))
# httpx logs every request at INFO: the sweeper asks Ray about each active run every few seconds.
LOGGING.setdefault("loggers", {})["httpx"] = {"level": "WARNING"}

if ENVIRONMENT == "production":
    from config.production_checks import assert_production_ready

    assert_production_ready(secret_key=SECRET_KEY, debug=DEBUG, allowed_hosts=ALLOWED_HOSTS,
                            insecure_default_secret_key=INSECURE_DEFAULT_SECRET_KEY)
    # Behind the TLS-terminating proxy (deploy/compose/nginx.conf), which sets X-Forwarded-Proto itself.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = os.environ.get("DJANGO_SECURE_SSL_REDIRECT", "1") == "1"
    # The health check is asked over plain HTTP from inside the cluster.
    SECURE_REDIRECT_EXEMPT = [r"^healthz"]
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("DJANGO_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
    SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_HSTS_PRELOAD", "1") == "1"
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = os.environ.get("DJANGO_SECURE_COOKIES", "1") == "1"
