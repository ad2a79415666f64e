"""The roles' backends as one value (RoleBackends): each backend once however many roles
share it, wrapped once, produced by a BackendPool that every engine built with it shares,
and the server's engines over the same backends (fake model, no server)."""

from __future__ import annotations

import asyncio

import pytest

from selfrefine import BackendPool, ConfigError, EngineSpec, FakeBackend, ModelSpec, SelfRefine
from selfrefine.backends.base import Backend
from selfrefine.backends.roles import RoleBackends
from selfrefine.service.engines import EnginePool
from selfrefine.service.schemas import LoopOptions
from selfrefine.service.upstream import Upstream
from selfrefine.tasks import get_task


class Closing(FakeBackend):
    """A fake that counts how often it is closed."""

    def __init__(self, name: str = "fake") -> None:
        super().__init__(default="A dog plays ball in the park.", name=name)
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class Wrapper:
    """A wrap that records every backend it is given and returns a new object for each."""

    def __init__(self) -> None:
        self.given: list[Backend] = []

    def __call__(self, backend: Backend) -> Backend:
        self.given.append(backend)
        return FakeBackend(name=f"wrapped {backend.name}")


def test_one_backend_serves_every_role_and_counts_once():
    main = FakeBackend()
    roles = RoleBackends.of(main)
    assert [roles[r] for r in ("generate", "feedback", "refine", "judge")] == [main, main, main, main]
    assert roles.model is main and list(roles) == ["generate", "feedback", "refine", "judge"]
    assert roles.distinct() == [main]
    with pytest.raises(KeyError):
        roles["critic"]


def test_the_judge_is_the_critic_s_backend_unless_given_its_own():
    main, critic, judge = FakeBackend(name="main"), FakeBackend(name="critic"), FakeBackend(name="judge")
    assert RoleBackends.of(main, feedback=critic)["judge"] is critic  # the critic's model judges
    assert RoleBackends.of(main, refine=critic)["judge"] is main  # no feedback model: --model's
    assert RoleBackends(main, critic, main).judge is critic  # built by fields: the same default
    own = RoleBackends.of(main, feedback=critic, judge=judge)
    assert [own[r] for r in own] == [main, critic, main, judge] and own.distinct() == [main, critic, judge]
    assert RoleBackends.of(main, judge=main).distinct() == [main]  # a judge given the same object: shared


def test_map_and_aclose_keep_the_judge_shared_or_its_own():
    main, critic = Closing("main"), Closing("critic")
    wrap = Wrapper()
    shared = RoleBackends.of(main, feedback=critic).map(wrap)
    assert wrap.given == [main, critic] and shared["judge"] is shared["feedback"]  # wrapped once, still shared
    own = RoleBackends.of(main, judge=critic).map(Wrapper())
    assert own["judge"] is not own["feedback"] and own["feedback"] is own["generate"]
    assert [b.name for b in own.distinct()] == ["wrapped main", "wrapped critic"]
    asyncio.run(RoleBackends.of(main, feedback=critic, judge=critic).aclose())
    assert (main.closed, critic.closed) == (1, 1)


def test_distinct_gives_each_backend_once_in_role_order():
    main, critic = FakeBackend(name="main"), FakeBackend(name="critic")
    assert RoleBackends.of(main, feedback=critic).distinct() == [main, critic]
    assert RoleBackends.of(main, refine=critic).distinct() == [main, critic]
    assert RoleBackends(critic, main, critic).distinct() == [critic, main]
    assert RoleBackends.of(main, feedback=main, refine=main).distinct() == [main]


def test_map_wraps_each_distinct_backend_once_and_keeps_sharing():
    main, critic = FakeBackend(name="main"), FakeBackend(name="critic")
    wrap = Wrapper()
    wrapped = RoleBackends.of(main, feedback=critic).map(wrap)
    assert wrap.given == [main, critic]  # main serves two roles, wrapped once
    assert wrapped["generate"] is wrapped["refine"]  # the two roles still share one backend
    assert wrapped["feedback"] is not wrapped["generate"]
    assert [b.name for b in wrapped.distinct()] == ["wrapped main", "wrapped critic"]


def test_aclose_closes_each_distinct_backend_once():
    main, critic = Closing("main"), Closing("critic")
    asyncio.run(RoleBackends.of(main, refine=critic).aclose())
    assert (main.closed, critic.closed) == (1, 1)


def test_an_engine_wraps_a_shared_backend_once():
    main = FakeBackend(name="main")
    wrap = Wrapper()
    engine = SelfRefine("commongen", main, wrap=wrap)
    assert wrap.given == [main]
    assert isinstance(engine.backends, RoleBackends)
    assert engine.backends["generate"] is engine.backends["feedback"] is engine.backends["refine"]
    assert engine.backends.distinct() == [engine.backends.model]


def test_an_engine_closes_each_backend_once():
    main, critic = Closing("main"), Closing("critic")
    engine = SelfRefine("commongen", main, feedback_model=critic, refine_model=main)
    engine.close()
    assert (main.closed, critic.closed) == (1, 1)


def test_a_role_backends_value_is_every_role_s_backend():
    roles = RoleBackends.of(FakeBackend(name="main"), feedback=FakeBackend(name="critic"))
    assert SelfRefine("commongen", roles).backends is roles
    with pytest.raises(ConfigError, match="every role"):
        SelfRefine("commongen", roles, feedback_model=FakeBackend())


def test_the_pool_opens_each_spec_once_and_its_engines_share_the_backends():
    opened = Wrapper()  # the pool's wrap sees each backend it opens, once
    pool = BackendPool(opened)
    fake, critic = ModelSpec(model="fake"), ModelSpec(model="fake", options={"latency": 0.5})
    spec = EngineSpec(task="commongen", model=fake, feedback_model=critic)
    first = SelfRefine.from_spec(spec, pool=pool)
    second = SelfRefine.from_spec(spec.replace(config={"max_iterations": 1}), pool=pool)
    assert len(opened.given) == 2  # two distinct specs, each opened and wrapped once
    assert all(first.backends[r] is second.backends[r] for r in ("generate", "feedback", "refine"))
    assert first.backends["generate"] is first.backends["refine"]
    assert first.backends["feedback"] is not first.backends["generate"]
    same = pool.roles(fake, feedback_model=ModelSpec(model="fake"))  # the same spec again: shared
    assert same.distinct() == [first.backends.model]


def test_a_judge_model_is_its_own_backend_in_the_library_and_the_spec():
    main, judge = FakeBackend(name="main", default="A dog."), FakeBackend(name="judge")
    engine = SelfRefine("commongen", main, judge_model=judge, max_iterations=0)
    assert engine.backends["judge"] is judge and engine.backends["feedback"] is main
    assert engine.run("dog, ball").config.models == {
        "generate": "main",
        "feedback": "main",
        "refine": "main",
        "judge": "judge",
    }
    with pytest.raises(ConfigError, match="every role"):
        SelfRefine("commongen", RoleBackends.of(main), judge_model=judge)
    pool = BackendPool()
    fake, slow = ModelSpec(model="fake"), ModelSpec(model="fake", options={"latency": 0.5})
    own = SelfRefine.from_spec(EngineSpec(task="commongen", model=fake, judge_model=slow), pool=pool)
    assert own.backends["judge"] is not own.backends["feedback"] and own.backends["judge"].latency == 0.5
    same = SelfRefine.from_spec(EngineSpec(task="commongen", model=fake, judge_model=fake), pool=pool)
    assert same.backends.distinct() == [own.backends.model]  # the same spec: one backend for every role


def test_from_spec_takes_backends_already_open():
    roles = RoleBackends.of(FakeBackend())
    engine = SelfRefine.from_spec(EngineSpec(task="commongen"), backends=roles)
    assert engine.backends is roles
    with pytest.raises(ConfigError, match="either backends"):
        SelfRefine.from_spec(EngineSpec(task="commongen"), backends=roles, pool=BackendPool())


def test_the_server_s_engines_share_its_backends_wrapped_once():
    main = FakeBackend(name="main")
    made: list[str] = []

    def make(name: str) -> Backend:
        made.append(name)
        return FakeBackend(name=name)

    wrap = Wrapper()
    tasks = {"commongen": get_task("commongen")}
    pool = EnginePool(RoleBackends.of(main), tasks, upstream=Upstream(("up",), make), wrap=wrap)
    one = pool.get("commongen", LoopOptions(max_iterations=1))
    two = pool.get("commongen", LoopOptions(max_iterations=2))
    assert one is not two and one.backends is two.backends is pool.backends
    assert wrap.given == [main]
    chosen = [pool.get("commongen", LoopOptions(model="up", max_iterations=n)) for n in (1, 2)]
    assert chosen[0].backends is chosen[1].backends  # the upstream model: one backend, one limit
    assert chosen[0].backends.distinct() == [chosen[0].backends["feedback"]]
    assert made == ["up"] and [b.name for b in wrap.given] == ["main", "up"]
