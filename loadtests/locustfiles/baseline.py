"""Baseline: a no-op JSON endpoint of the same server.

What it shows: what the server, the framework and the load generator cost per
request with no database, no Redis and no lock, so that each strategy's figures
can be read against it.
"""

from locust import FastHttpUser, constant, task


class Ping(FastHttpUser):
    wait_time = constant(0)

    @task
    def ping(self) -> None:
        with self.client.get("/api/ping", name="/api/ping", catch_response=True) as response:
            if response.status_code == 200 and response.json() == {"ok": True}:
                response.success()
            else:
                response.failure(f"ping answered {response.status_code}")
