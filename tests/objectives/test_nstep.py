"""n-step targets: MultiStep across collector batches, TD0Estimator's gamma ** k, SAC/DrQ."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl_lite.data import MultiStep
from torchrl_lite.objectives.value import TD0Estimator


def _trajectory(steps=11, envs=None, seed=0):
    """A [*envs, steps] batch with observation t, reward r_t and a few episode ends."""
    g = torch.Generator().manual_seed(seed)
    shape = (*([envs] if envs else []), steps)
    obs = torch.arange(steps, dtype=torch.float32).expand(shape).unsqueeze(-1).clone()
    done = torch.rand(*shape, 1, generator=g) < 0.2
    return TensorDict(
        {"observation": obs,
         "next": {"observation": obs + 1, "reward": torch.randn(*shape, 1, generator=g),
                  "done": done, "terminated": done & (torch.rand(*shape, 1, generator=g) < 0.5)}},
        batch_size=shape,
    )  # fmt: skip


def _plain_nstep(td, gamma, n):
    """A plain loop over one [T] trajectory: (return, steps, bootstrap observation)."""
    reward, done = td["next", "reward"].flatten(), td["next", "done"].flatten()
    out = []
    for t in range(td.batch_size[0]):
        ret, k = 0.0, 0
        while k <= n and t + k < td.batch_size[0]:
            ret += gamma**k * reward[t + k].item()
            k += 1
            if done[t + k - 1]:
                break
        out.append((ret, k, td["next", "observation"][t + k - 1].item()))
    return out


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_multistep_across_batches_matches_a_plain_loop_over_the_whole_trajectory(chunk):
    td = _trajectory(steps=23)
    gamma, n = 0.9, 2
    post = MultiStep(gamma, n, across_batches=True)
    outs = [post(td[i : i + chunk]) for i in range(0, 23, chunk)]
    assert outs[0].batch_size[0] == max(chunk - n, 0)  # the first batch holds n steps back
    got = torch.cat([o for o in outs if o.batch_size[0]], 0)
    assert got.batch_size[0] == 23 - n  # the last n steps wait for the next batch
    ref = _plain_nstep(td, gamma, n)[: 23 - n]
    torch.testing.assert_close(got["next", "reward"].flatten(), torch.tensor([r[0] for r in ref]))
    assert got["steps_to_next_obs"].flatten().tolist() == [r[1] for r in ref]
    assert got["next", "observation"].flatten().tolist() == [r[2] for r in ref]
    torch.testing.assert_close(got["next", "original_reward"], td["next", "reward"][: 23 - n])
    # a window is cut only by an episode end: never by a batch end
    full = got["steps_to_next_obs"].flatten() == n + 1
    ended = torch.tensor([td["next", "done"][t : t + n].any().item() for t in range(23 - n)])
    assert (full | ended).all()


def test_multistep_across_batches_keeps_env_rows_apart_and_reset_drops_held_steps():
    td = _trajectory(steps=12, envs=3)
    post = MultiStep(0.8, 3, across_batches=True)
    got = torch.cat([post(td[:, i : i + 4]) for i in range(0, 12, 4)], 1)  # [3, 9]
    whole = MultiStep(0.8, 3)(td)[:, :9]  # within one batch: the same windows
    for key in (("next", "reward"), ("next", "observation"), "steps_to_next_obs"):
        torch.testing.assert_close(got[key], whole[key])
    with pytest.raises(ValueError, match=r"held steps are \[3, 3\].*reset\(\)"):
        post(td[:2, :4])  # two envs now: not the same collector's batches
    post.reset()
    assert post(td[:2, :4]).batch_size == (2, 1)


def test_td0_discounts_the_bootstrap_by_gamma_to_the_steps_of_each_transition():
    n = 7
    g = torch.Generator().manual_seed(0)
    steps = torch.randint(1, 4, (n, 1), generator=g)
    terminated = torch.rand(n, 1, generator=g) < 0.3
    td = TensorDict(
        {"observation": torch.randn(n, 2, generator=g), "steps_to_next_obs": steps,
         "next": {"observation": torch.randn(n, 2, generator=g), "reward": torch.randn(n, 1, generator=g),
                  "done": terminated.clone(), "terminated": terminated}},
        batch_size=[n],
    )  # fmt: skip
    critic = TensorDictModule(torch.nn.Linear(2, 1), ["observation"], ["state_value"])
    target = TD0Estimator(gamma=0.9, value_network=critic).value_estimate(td)
    with torch.no_grad():
        v_next = critic.module(td["next", "observation"])
    for i in range(n):  # the textbook n-step target, one transition at a time
        boot = 0.0 if terminated[i] else 0.9 ** steps[i].item() * v_next[i].item()
        assert target[i].item() == pytest.approx(td["next", "reward"][i].item() + boot, rel=1e-5)
    plain = TD0Estimator(gamma=0.9, value_network=critic).value_estimate(
        td.exclude("steps_to_next_obs")
    )
    one = ~terminated & (steps == 1)
    torch.testing.assert_close(target[one], plain[one])  # k = 1: the one-step target
    with pytest.raises(ValueError, match=r"'steps_to_next_obs' has shape \[7\].*expected \[7, 1\]"):
        TD0Estimator(gamma=0.9, value_network=critic).value_estimate(
            td.set("steps_to_next_obs", steps.flatten())
        )


def _sac(gamma):
    from tensordict.nn import NormalParamExtractor

    from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl_lite.objectives import SACLoss

    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
                         ["observation"], ["loc", "scale"]),
        ["loc", "scale"], distribution_class=TanhNormal,
    )  # fmt: skip
    qvalue = ValueOperator(
        MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"]
    )
    return SACLoss(actor, qvalue, action_spec=None, gamma=gamma, alpha_init=0.3)


def test_sac_n_step_target_equals_the_one_step_loss_with_gamma_to_the_n():
    g = torch.Generator().manual_seed(1)
    n, flag = 12, torch.zeros(12, 1, dtype=torch.bool)
    batch = TensorDict(
        {"observation": torch.randn(n, 3, generator=g), "action": torch.rand(n, 1, generator=g) * 2 - 1,
         "steps_to_next_obs": torch.full((n, 1), 3),
         "next": {"observation": torch.randn(n, 3, generator=g), "reward": torch.randn(n, 1, generator=g),
                  "done": flag, "terminated": flag}},
        batch_size=[n],
    )  # fmt: skip
    torch.manual_seed(5)
    got = _sac(0.95)(batch.clone())
    torch.manual_seed(5)
    ref = _sac(0.95**3)(batch.exclude("steps_to_next_obs"))
    for key in ("loss_qvalue", "td_error", "loss_actor"):
        torch.testing.assert_close(got[key], ref[key])
    torch.manual_seed(5)
    one_step = _sac(0.95)(batch.exclude("steps_to_next_obs"))
    assert not torch.allclose(got["loss_qvalue"], one_step["loss_qvalue"])


def test_drq_passes_the_steps_to_the_sac_target():
    from tests.recipes.test_pixels_sac_dreamer import _drq_loss, _pixel_batch

    batch = _pixel_batch()
    loss, _ = _drq_loss()
    torch.manual_seed(1)
    got = loss(batch.clone().set("steps_to_next_obs", torch.full((16, 1), 3)))
    loss3, _ = _drq_loss()
    loss3.sac_loss.make_value_estimator(gamma=0.99**3)
    torch.manual_seed(1)
    ref = loss3(batch.clone())
    torch.testing.assert_close(got["loss_qvalue"], ref["loss_qvalue"])
    torch.testing.assert_close(got["td_error"], ref["td_error"])


def test_episode_returns_counts_each_episode_once_in_n_step_batches():
    from torchrl_lite.collectors import RandomPolicy, SyncDataCollector
    from torchrl_lite.recipes.common import EpisodeReturns, make_env

    def returns(postproc):
        env = make_env("CartPole-v1", seed=3)
        torch.manual_seed(0)
        collector = SyncDataCollector(
            env, RandomPolicy(env.action_spec), frames_per_batch=50, total_frames=400,
            postproc=postproc,
        )  # fmt: skip
        hook = EpisodeReturns()
        for batch in collector:
            hook(batch)
        collector.shutdown()
        return [r for _, r in hook.history]

    plain = returns(None)
    nstep = returns(MultiStep(0.99, 2, across_batches=True))
    assert len(plain) >= 10
    # the same episodes once each (one that ends in the two held-back steps may be missing)
    assert nstep == plain[: len(nstep)] and len(nstep) >= len(plain) - 1


def test_dqn_n_step_target_equals_the_one_step_loss_with_gamma_to_the_n():
    from torchrl_lite.data import OneHot
    from torchrl_lite.modules import QValueActor
    from torchrl_lite.objectives import DQNLoss

    g = torch.Generator().manual_seed(2)
    n, flag = 10, torch.zeros(10, 1, dtype=torch.bool)
    batch = TensorDict(
        {"observation": torch.randn(n, 3, generator=g),
         "action": torch.nn.functional.one_hot(torch.randint(0, 2, (n,), generator=g), 2),
         "steps_to_next_obs": torch.full((n, 1), 3),
         "next": {"observation": torch.randn(n, 3, generator=g), "reward": torch.randn(n, 1, generator=g),
                  "done": flag, "terminated": flag}},
        batch_size=[n],
    )  # fmt: skip

    def loss(gamma):
        torch.manual_seed(0)
        actor = QValueActor(torch.nn.Linear(3, 2), in_keys=["observation"], spec=OneHot(2))
        return DQNLoss(actor, delay_value=True, double_dqn=True, gamma=gamma)

    got = loss(0.9)(batch.clone())["loss"]
    torch.testing.assert_close(got, loss(0.9**3)(batch.exclude("steps_to_next_obs"))["loss"])
    assert not torch.allclose(got, loss(0.9)(batch.exclude("steps_to_next_obs"))["loss"])


def test_recipes_build_the_n_step_post_processor_and_reject_a_bad_n():
    from torchrl_lite.recipes import config_for, get_recipe
    from torchrl_lite.recipes.common import n_step_postproc

    trainer, _ = get_recipe("dqn").make_trainer(
        config_for(get_recipe("dqn"), "CartPole-v1", n_step=3, gamma=0.98), progress_bar=False
    )
    post = trainer.collector.postproc
    assert isinstance(post, MultiStep) and (post.n_steps, post.gamma, post.across_batches) == (
        2,
        0.98,
        True,
    )
    trainer.collector.shutdown()
    assert n_step_postproc(1, 0.99) is None
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match=f"n_step must be an int >= 1, got {bad!r}"):
            n_step_postproc(bad, 0.99)


def test_the_trainer_counts_collected_frames_not_the_steps_a_post_processor_holds_back():
    from tests.recipes.test_pixels_sac_dreamer import replay_buffer_of
    from torchrl_lite.recipes import config_for, get_recipe

    recipe = get_recipe("sac")
    cfg = config_for(recipe, "Pendulum-v1", frames=60, init_random_frames=60, n_step=3)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()  # random frames only: fills the buffer
    assert trainer.collected_frames == 60 and len(replay_buffer_of(trainer)) == 58


def test_c51_n_step_target_discounts_each_window_by_gamma_to_its_length():
    from torchrl_lite.modules import DistributionalQValueActor
    from torchrl_lite.objectives import DistributionalDQNLoss

    g = torch.Generator().manual_seed(3)
    n, flag = 12, torch.zeros(12, 1, dtype=torch.bool)
    steps = torch.tensor([1, 2, 3] * 4).reshape(n, 1)  # windows cut by episode ends are shorter
    batch = TensorDict(
        {"observation": torch.randn(n, 3, generator=g),
         "action": torch.randint(0, 2, (n,), generator=g), "steps_to_next_obs": steps,
         "next": {"observation": torch.randn(n, 3, generator=g),
                  "reward": torch.randn(n, 1, generator=g), "done": flag, "terminated": flag}},
        batch_size=[n],
    )  # fmt: skip

    def loss(gamma):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(3, 5 * 2), torch.nn.Unflatten(-1, (5, 2)))
        actor = DistributionalQValueActor(
            net, support=torch.linspace(-2, 2, 5), action_space="categorical"
        )
        return DistributionalDQNLoss(actor, gamma=gamma)

    got = batch.clone()
    loss(0.9)(got)
    for k in (1, 2, 3):  # each sample as the one-step loss with gamma ** k scores it
        ref = batch.exclude("steps_to_next_obs")
        loss(0.9**k)(ref)
        rows = steps.flatten() == k
        torch.testing.assert_close(got["td_error"][rows], ref["td_error"][rows])
    plain = batch.exclude("steps_to_next_obs")
    loss(0.9)(plain)
    assert not torch.allclose(got["td_error"], plain["td_error"])
    with pytest.raises(
        ValueError, match=r"'steps_to_next_obs' has shape \[12\]; expected \[12, 1\]"
    ):
        loss(0.9)(batch.clone().set("steps_to_next_obs", steps.flatten()))


@pytest.mark.parametrize("name", ["TD1Estimator", "TDLambdaEstimator", "GAE"])
def test_multi_step_estimators_refuse_n_step_windows_and_accept_one_step_ones(name):
    from torchrl_lite.objectives import value

    kwargs = {"gamma": 0.9} if name == "TD1Estimator" else {"gamma": 0.9, "lmbda": 0.8}
    critic = TensorDictModule(torch.nn.Linear(1, 1), ["observation"], ["state_value"])
    estimator = getattr(value, name)(value_network=critic, **kwargs)
    td = _trajectory(steps=9)
    reference = estimator.value_estimate(td.clone())
    ones = td.clone().set("steps_to_next_obs", torch.ones(9, 1, dtype=torch.long))
    torch.testing.assert_close(estimator.value_estimate(ones), reference)
    windows = MultiStep(0.9, 2)(td.clone())
    with pytest.raises(ValueError, match=rf"{name}: the batch holds n-step transitions "
                       r"\('steps_to_next_obs' up to 3, from MultiStep\).*Use TD0Estimator"):  # fmt: skip
        estimator.value_estimate(windows)


def test_td0_n_step_discount_is_per_call_when_threads_share_the_estimator():
    from concurrent.futures import ThreadPoolExecutor

    critic = TensorDictModule(torch.nn.Linear(1, 1), ["observation"], ["state_value"])
    estimator = TD0Estimator(gamma=0.9, value_network=critic)
    batches = [_trajectory(steps=64, seed=s).set("steps_to_next_obs", torch.full((64, 1), k))
               for s, k in enumerate([1, 2, 3, 4] * 2)]  # fmt: skip
    expected = [estimator.value_estimate(b.clone()) for b in batches]

    def estimate(i):
        return [estimator.value_estimate(batches[i].clone()) for _ in range(50)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(estimate, range(8)))
    for want, got in zip(expected, results):
        for value in got:
            torch.testing.assert_close(value, want)
