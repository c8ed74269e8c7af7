FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=config.settings.production
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config default-libmysqlclient-dev build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN DJANGO_SECRET_KEY=build-only-build-only-build-only-build-only-build-only \
    DATABASE_URL=mysql://build@localhost/build python manage.py collectstatic --noinput -v0
EXPOSE 8000
# gunicorn takes its worker count from WEB_CONCURRENCY (docker-compose.yml sets it); its
# configuration sets up the workers' Prometheus counts (var/prometheus/8000, emptied at start).
CMD ["gunicorn", "--config", "config/gunicorn.py", "config.wsgi", "--bind", "0.0.0.0:8000"]
