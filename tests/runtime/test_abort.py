import asyncio

import pytest

from picourse.abort import AbortController, AbortError


def test_a_new_signal_is_not_aborted() -> None:
    controller = AbortController()
    assert not controller.signal.aborted
    assert controller.signal.reason is None
    controller.signal.raise_if_aborted()


def test_abort_sets_reason_and_the_first_reason_wins() -> None:
    controller = AbortController()
    controller.abort("user pressed Esc")
    controller.abort("second")
    assert controller.signal.aborted
    assert controller.signal.reason == "user pressed Esc"
    with pytest.raises(AbortError, match="user pressed Esc"):
        controller.signal.raise_if_aborted()


def test_listener_runs_once_on_abort() -> None:
    controller = AbortController()
    calls: list[str] = []
    controller.signal.add_listener(lambda: calls.append("heard"))
    controller.abort()
    controller.abort()
    assert calls == ["heard"]


def test_listener_added_after_abort_runs_at_once() -> None:
    controller = AbortController()
    controller.abort("late")
    calls: list[str] = []
    remove = controller.signal.add_listener(lambda: calls.append("heard"))
    assert calls == ["heard"]
    remove()  # still callable, does nothing


def test_removed_listener_is_not_called_and_remove_is_idempotent() -> None:
    controller = AbortController()
    calls: list[str] = []
    remove = controller.signal.add_listener(lambda: calls.append("heard"))
    remove()
    remove()
    controller.abort()
    assert calls == []


def test_a_failing_listener_does_not_silence_the_others() -> None:
    controller = AbortController()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda: calls.append("second"))
    with pytest.raises(ExceptionGroup):
        controller.abort()
    assert calls == ["second"]
    assert controller.signal.aborted


def test_wait_returns_the_reason_when_aborted_later() -> None:
    async def scenario() -> object:
        controller = AbortController()
        waiter = asyncio.create_task(controller.signal.wait())
        await asyncio.sleep(0)  # let the waiter subscribe
        assert not waiter.done()
        controller.abort("stop now")
        return await asyncio.wait_for(waiter, timeout=5)

    assert asyncio.run(scenario()) == "stop now"


def test_wait_on_an_aborted_signal_returns_at_once() -> None:
    async def scenario() -> object:
        controller = AbortController()
        controller.abort("done")
        return await asyncio.wait_for(controller.signal.wait(), timeout=5)

    assert asyncio.run(scenario()) == "done"


def test_cancelled_wait_leaves_no_listener_behind() -> None:
    async def scenario() -> int:
        controller = AbortController()
        waiter = asyncio.create_task(controller.signal.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return len(controller.signal._listeners)

    assert asyncio.run(scenario()) == 0
