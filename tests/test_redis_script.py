"""A script over each thread's own connection (core.redis_script) answers each caller its
own reply, as the pool would: across threads and a fork, after the server closed the
connection, after it forgot the script, and after a call was cut off mid-answer.

Each test runs its own redis-server, so that killing clients and flushing scripts touch
nothing else.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
import redis

from core.redis_script import (
    OwnConnectionFunction,
    OwnConnectionScript,
    function_on_own_connections,
    script_on_own_connections,
)
from locking.testing import RedisServer

from .waiting import wait_until

pytestmark = pytest.mark.live

ECHO = "return ARGV[1]"
COUNT = "return redis.call('INCR', KEYS[1])"
# Answers ARGV[2], after ARGV[1] milliseconds of busy waiting (Redis answers nothing else meanwhile).
SLOW_ECHO = """
local started = redis.call('TIME')
local start_us = started[1] * 1000000 + started[2]
repeat
  local now = redis.call('TIME')
until now[1] * 1000000 + now[2] - start_us >= tonumber(ARGV[1]) * 1000
return ARGV[2]
"""


@pytest.fixture
def server():
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture
def client(server):
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    yield client
    client.close()


def _connections_calling(client: redis.Redis) -> int:
    """The server's clients whose last command was a script call (the script's loading
    goes through the client's pool, once per thread that found it missing)."""
    return sum(1 for c in client.client_list() if c["cmd"] == "evalsha")


def test_each_thread_gets_its_own_replies_over_its_own_connection(client):
    echo = OwnConnectionScript(client, ECHO)
    wrong: list[tuple[bytes, bytes]] = []
    start, done, counted = threading.Barrier(8), threading.Barrier(9), threading.Event()

    def calls(n: int) -> None:
        start.wait()
        for i in range(300):
            sent = f"thread {n} call {i}".encode()
            answer = echo(args=[sent])
            if answer != sent:
                wrong.append((sent, answer))
        done.wait()
        counted.wait(10)  # a thread's connection lasts as long as the thread

    threads = [threading.Thread(target=calls, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    done.wait(30)
    connections = _connections_calling(client)
    counted.set()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert connections == 8  # one per thread, each kept for the thread's next call


def test_a_connection_the_server_closed_is_replaced_without_failing_the_call(client):
    echo = OwnConnectionScript(client, ECHO)
    assert echo(args=["before"]) == b"before"
    killed = client.client_kill_filter(_type="normal", skipme=True)
    assert killed == 1
    assert echo(args=["after"]) == b"after"


def test_a_script_the_server_forgot_is_loaded_and_runs_once(client):
    count = OwnConnectionScript(client, COUNT)
    assert count(keys=["n"]) == 1
    client.script_flush()
    assert count(keys=["n"]) == 2
    assert int(client.get("n")) == 2


def test_a_call_cut_off_mid_answer_leaves_nothing_for_the_next(server):
    impatient = redis.Redis.from_url(server.url, socket_timeout=0.2)
    slow_echo = OwnConnectionScript(impatient, SLOW_ECHO)
    with pytest.raises(redis.TimeoutError):
        slow_echo(args=[600, "late"])
    # The late answer has arrived by now: it must not be read as the next call's.
    redis.Redis.from_url(server.url).ping()  # waits until the slow script is done
    assert slow_echo(args=[0, "next"]) == b"next"
    impatient.close()


def test_a_forked_child_never_shares_its_parents_connection(client):
    echo = OwnConnectionScript(client, ECHO)
    assert echo(args=["parent"]) == b"parent"  # the parent's connection is made
    pid = os.fork()
    if pid == 0:  # the child: its own answers, while the parent sends on its connection
        ok = all(echo(args=[f"child {i}"]) == f"child {i}".encode() for i in range(500))
        os._exit(0 if ok else 1)
    parent_ok = all(echo(args=[f"parent {i}"]) == f"parent {i}".encode() for i in range(500))
    _, status = os.waitpid(pid, 0)
    assert parent_ok
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_error_reply_is_raised_and_the_connection_kept_in_step(client):
    fails = OwnConnectionScript(client, "return redis.error_reply('refused here')")
    echo = OwnConnectionScript(client, ECHO)
    with pytest.raises(redis.ResponseError, match="refused here"):
        fails()
    assert echo(args=["then"]) == b"then"


def test_unreachable_redis_raises_a_connection_error(server, client):
    echo = OwnConnectionScript(client, ECHO)
    server.stop()
    with pytest.raises(redis.ConnectionError):
        echo(args=["nobody"])
    server.start()
    assert echo(args=["back"]) == b"back"


def test_wait_after_the_script_on_its_connection_answers_how_many_replicas_have_it(server, client):
    replica = RedisServer(None, "--replicaof", "127.0.0.1", str(server.port)).start()
    try:
        linked = redis.Redis(port=replica.port)
        wait_until(lambda: linked.info("replication")["master_link_status"] == "up", "the replica in sync")
        count = OwnConnectionScript(client, COUNT)
        assert count(keys=["n"], wait=(1, 1000)) == (1, 1)
        os.kill(replica.pid, signal.SIGSTOP)  # its master goes on, and nothing reaches it
        try:
            assert count(keys=["n"], wait=(1, 50)) == (2, 0)
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        client.script_flush()  # the script's NOSCRIPT and WAIT's answer both read, in step
        assert count(keys=["n"], wait=(1, 1000)) == (3, 1)
        assert count(keys=["n"]) == 4
    finally:
        replica.close()


def test_a_cluster_client_runs_the_script_on_the_node_of_each_key(redis_cluster):
    script = script_on_own_connections(redis_cluster, COUNT)
    keys = [f"script-test:{{{n}}}" for n in range(30)]
    assert len({redis_cluster.get_node_from_key(key).port for key in keys}) == 3
    redis_cluster.delete(*keys)
    for key in keys:
        assert script(keys=[key]) == 1
        assert script(keys=[key], wait=(1, 1000)) == (2, 1)  # each master's replica
    assert all(redis_cluster.get(key) == b"2" for key in keys)


def test_the_kept_connections_count_against_the_pools_max_connections(server):
    bounded = redis.Redis.from_url(server.url, max_connections=2)
    echo = OwnConnectionScript(bounded, ECHO)
    called, finish = threading.Barrier(3), threading.Event()

    def call_and_stay(n: int) -> None:
        echo(args=[n])
        called.wait(10)
        finish.wait(10)  # the thread, and its connection, live on

    threads = [threading.Thread(target=call_and_stay, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    called.wait(10)
    try:
        with pytest.raises(redis.ConnectionError, match="Too many connections"):
            bounded.ping()  # both of the pool's connections are kept by the threads
        with pytest.raises(redis.ConnectionError, match="Too many connections"):
            echo(args=["a third thread's call"])
    finally:
        finish.set()
        for thread in threads:
            thread.join()
    # Ended, the threads gave their connections back.
    wait_until(lambda: not bounded.connection_pool._in_use_connections, "the connections are given back")
    assert bounded.ping()
    bounded.close()


def test_closing_the_client_closes_the_kept_connections(server):
    named = redis.Redis.from_url(server.url, client_name="kept-by-a-thread")
    echo = OwnConnectionScript(named, ECHO)
    assert echo(args=["x"]) == b"x"
    watcher = redis.Redis.from_url(server.url)

    def open_named() -> int:
        return sum(1 for c in watcher.client_list() if c["name"] == "kept-by-a-thread")

    assert open_named() >= 1
    named.close()
    wait_until(lambda: open_named() == 0, "the server sees no connection of the closed client")
    assert echo(args=["again"]) == b"again"  # as a closed client does, it connects again on use
    named.close()
    watcher.close()


def test_a_function_runs_the_scripts_text_and_is_loaded_where_the_server_lacks_it(client):
    count = OwnConnectionFunction(client, COUNT, prefix="test_count")
    assert count(keys=["n"]) == 1
    assert [c["cmd"] for c in client.client_list() if c["cmd"] == "fcall"] == ["fcall"]
    client.function_flush()  # as a server restarted without it
    assert count(keys=["n"]) == 2
    assert int(client.get("n")) == 2
    libraries = {dict(zip(one[::2], one[1::2], strict=True))[b"library_name"] for one in client.function_list()}
    assert libraries == {count.name.encode()}


def test_each_text_is_a_library_of_its_own_and_loading_it_again_changes_nothing(client):
    echo = OwnConnectionFunction(client, ECHO, prefix="test")
    count = OwnConnectionFunction(client, COUNT, prefix="test")
    again = OwnConnectionFunction(client, COUNT, prefix="test")  # another process's, say
    assert echo.name != count.name == again.name
    assert (echo(args=["a"]), count(keys=["m"]), again(keys=["m"])) == (b"a", 1, 2)
    client.function_delete(count.name)
    assert again(keys=["m"]) == 3 and count(keys=["m"]) == 4


def test_a_functions_error_reply_is_raised_and_the_connection_kept_in_step(client):
    fails = OwnConnectionFunction(client, "return redis.error_reply('refused here')", prefix="test")
    echo = OwnConnectionFunction(client, ECHO, prefix="test")
    with pytest.raises(redis.ResponseError, match="refused here"):
        fails()
    assert echo(args=["then"]) == b"then"


def test_a_cluster_client_runs_the_function_on_the_node_of_each_key_each_master_loading_it(redis_cluster):
    script = function_on_own_connections(redis_cluster, COUNT, prefix="test_cluster")
    masters = [redis_cluster.get_redis_connection(node) for node in redis_cluster.get_primaries()]
    for master in masters:
        master.function_flush()  # none has it yet
        master.config_resetstat()
    keys = [f"function-test:{{{n}}}" for n in range(30)]
    assert len({redis_cluster.get_node_from_key(key).port for key in keys}) == 3
    redis_cluster.delete(*keys)
    for key in keys:
        assert script(keys=[key]) == 1
        assert script(keys=[key], wait=(1, 1000)) == (2, 1)  # each master's replica, after the FCALL
    assert all(redis_cluster.get(key) == b"2" for key in keys)
    for master in masters:
        libraries = [dict(zip(one[::2], one[1::2], strict=True))[b"library_name"] for one in master.function_list()]
        assert len(libraries) == 1 and libraries[0].startswith(b"test_cluster_")
        stats = master.info("commandstats")
        assert stats["cmdstat_fcall"]["calls"] > 0 and "cmdstat_evalsha" not in stats


def test_a_server_without_functions_runs_the_script_by_its_sha():
    """A Redis before 7 (``make run``'s embedded one) answers FCALL as an unknown command."""
    server = RedisServer(None, "--rename-command", "FCALL", '""').start()
    client = redis.Redis.from_url(server.url)
    count = OwnConnectionFunction(client, COUNT, prefix="test")
    try:
        assert (count(keys=["n"]), count(keys=["n"])) == (1, 2)
        assert count.by_sha and _connections_calling(client) == 1
        client.script_flush()
        assert count(keys=["n"]) == 3
    finally:
        client.close()
        server.close()
