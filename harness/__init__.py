"""What the load tests, the fault runner, the benchmarks and the race lab share to run the
project from outside: the server's lifecycle (``server``: gunicorn, its Redlock servers,
a Celery worker and beat), the description of the machine a figure was measured on
(``machine``) and the set-up of a command that drives the project (``django_setup``).

Its own package, under ``loadtests`` and ``benchmarks`` and beside the products: both
import it and neither imports the other, and it imports nothing but ``core`` and
``locking``, so that starting a server never depends on what a product does."""
