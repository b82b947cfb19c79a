"""A distributed job's gang seats in a real Redis: ranks by seat, exactly one winner
between the last seat and the timeout, and nothing to join once a gang is over."""

from __future__ import annotations

import threading

from core.channel import Channel
from workers.gang.seats import ABANDONED, FAILED, FULL, STARTED, GangSeats


def test_seats_are_ranks_and_a_full_gang_takes_nobody_else(channel: Channel) -> None:
    seats = GangSeats(channel, "job-1")
    leader = seats.open(3)
    assert (leader.generation, leader.rank, leader.size) == (1, 0, 3)
    ranks = [seats.join(1) for _ in range(2)]
    assert [s.rank for s in ranks if s] == [1, 2]
    assert seats.state(1)[0] == FULL
    assert seats.join(1) is None  # full: a surplus message skips
    assert not seats.abandon(1, "too late")  # the last seat won
    seats.start(1, "127.0.0.1:1234")
    assert seats.wait_address(1, 1.0) == ("127.0.0.1:1234", "")
    # a new generation after a failure starts empty
    seats.fail(1, "rank 1 died")
    assert seats.state(1) == (FAILED, "rank 1 died")
    assert seats.open(3).generation == 2 and seats.joined(2) == 1


def test_an_abandoned_gang_sends_its_joiners_away(channel: Channel) -> None:
    seats = GangSeats(channel, "job-2")
    seats.open(4)
    assert seats.join(1) is not None
    assert seats.abandon(1, "did not fill")
    assert seats.join(1) is None
    assert seats.wait_address(1, 5.0) == (None, "did not fill")
    assert seats.state(1)[0] == ABANDONED


def test_the_last_seat_and_the_timeout_race_with_one_winner(channel: Channel) -> None:
    for generation in range(1, 21):
        seats = GangSeats(channel, "job-3")
        assert seats.open(2).generation == generation
        results: dict[str, object] = {}

        def take(seats: GangSeats = seats, results: dict[str, object] = results,
                 generation: int = generation) -> None:
            results["seat"] = seats.join(generation)

        join = threading.Thread(target=take)
        join.start()
        abandoned = seats.abandon(generation, "timeout")
        join.join()
        assert abandoned != (results["seat"] is not None)
        assert seats.state(generation)[0] in ((ABANDONED,) if abandoned else (FULL, STARTED))
