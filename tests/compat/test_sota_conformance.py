"""Names and behaviours TorchRL's online example scripts (sota-implementations) rely on.

Each test reproduces the call shape a script uses and checks the result against an
independent reference (a plain loop, a textbook formula).
"""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded


# -- ClipTransform / SignTransform ----------------------------------------------------------
def test_clip_transform_clamps_outputs_and_actions_and_bounds_the_spec():
    from torchrl_lite.envs import ClipTransform, GymEnv, TransformedEnv

    env = TransformedEnv(
        GymEnv("Pendulum-v1"),
        ClipTransform(in_keys=["observation"], in_keys_inv=["action"], low=-0.5, high=0.5),
    )
    spec = env.observation_spec["observation"]
    assert isinstance(spec, Bounded)
    assert float(spec.low.max()) == -0.5 and float(spec.high.min()) == 0.5
    td = env.rollout(20, lambda td: td.set("action", torch.full((1,), 2.0)))
    assert td["next", "observation"].abs().max() <= 0.5
    # the raw env would have applied torque 2.0; the clipped one saw 0.5
    t = ClipTransform(in_keys_inv=["action"], low=-0.5, high=0.5)
    out = t.inv(TensorDict(action=torch.tensor([2.0, -3.0, 0.1])))
    torch.testing.assert_close(out["action"], torch.tensor([0.5, -0.5, 0.1]))


def test_clip_transform_one_sided_and_bad_bounds():
    from torchrl_lite.envs import ClipTransform

    x = torch.tensor([-2.0, 0.0, 3.0])
    out = ClipTransform(in_keys=["x"], high=1.0)(TensorDict(x=x.clone()))["x"]
    torch.testing.assert_close(out, torch.minimum(x, torch.tensor(1.0)))
    with pytest.raises(TypeError, match="needs low, high or both"):
        ClipTransform(in_keys=["x"])
    with pytest.raises(ValueError, match="strictly lower"):
        ClipTransform(in_keys=["x"], low=1.0, high=1.0)
    with pytest.raises(TypeError, match="must be a scalar"):
        ClipTransform(in_keys=["x"], low=torch.zeros(2))


def test_sign_transform_maps_rewards_to_their_sign():
    from torchrl_lite.envs import GymEnv, SignTransform, TransformedEnv

    env = TransformedEnv(GymEnv("Pendulum-v1"), SignTransform(in_keys=["reward"]))
    spec = env.reward_spec
    assert isinstance(spec, Bounded) and float(spec.low) == -1 and float(spec.high) == 1
    env.set_seed(0)
    reward = env.rollout(10)["next", "reward"]
    assert set(reward.unique().tolist()) <= {-1.0, 0.0, 1.0}
    x = torch.tensor([-2.5, 0.0, 7.0])
    out = SignTransform(in_keys=["r"])(TensorDict(r=x.clone()))["r"]
    assert out.tolist() == [(v > 0) - (v < 0) for v in x.tolist()]


# -- EndOfLifeTransform and Atari ids ---------------------------------------------------------
def _atari_env(**kwargs):
    pytest.importorskip("ale_py")
    from torchrl_lite.envs import GymEnv

    return GymEnv("BreakoutNoFrameskip-v4", categorical_action_encoding=True, **kwargs)


def test_gym_env_accepts_ale_v4_ids():
    env = _atari_env()
    assert env.action_spec.n == 4
    env.close()


def test_end_of_life_marks_each_lost_life_against_the_ale_count():
    from torchrl_lite.envs import EndOfLifeTransform, TransformedEnv

    base = _atari_env()
    eol = EndOfLifeTransform()
    env = TransformedEnv(base, eol)
    assert "end-of-life" in env.observation_spec.keys()
    assert "end-of-life" not in env.full_done_spec.keys()  # never resets the env
    env.set_seed(0)
    td = env.rollout(400, break_when_any_done=False)
    lives = td["next", "lives"]
    before = torch.cat([td["lives"][:1], lives[:-1]])
    expected = (lives < before).unsqueeze(-1) | td["next", "done"]
    assert expected.any()  # Breakout loses lives within 400 random steps
    torch.testing.assert_close(td["next", "end-of-life"], expected)
    assert not td["next", "done"].any()


def test_end_of_life_register_keys_points_a_loss_at_it():
    from torchrl_lite.envs import EndOfLifeTransform
    from torchrl_lite.objectives.value import GAE

    critic = torch.nn.Linear(1, 1)
    from tensordict.nn import TensorDictModule

    gae = GAE(
        gamma=0.9,
        lmbda=0.9,
        value_network=TensorDictModule(critic, ["observation"], ["state_value"]),
    )
    EndOfLifeTransform().register_keys(gae)
    assert gae.tensor_keys.done == "end-of-life" == gae.tensor_keys.terminated
    with pytest.raises(TypeError, match="dotted attribute path"):
        EndOfLifeTransform(eol_attribute="")


def test_end_of_life_names_the_missing_attribute():
    from torchrl_lite.envs import EndOfLifeTransform, GymEnv, TransformedEnv

    env = TransformedEnv(GymEnv("Pendulum-v1"), EndOfLifeTransform())
    with pytest.raises(AttributeError, match="unwrapped.ale.lives"):
        env.reset()


# -- TanhModule -------------------------------------------------------------------------------
def test_tanh_module_maps_into_the_spec_box():
    from torchrl_lite.modules import TanhModule

    spec = Bounded(torch.tensor([-2.0, 0.0]), torch.tensor([3.0, 1.0]), (2,))
    m = TanhModule(in_keys=["param"], out_keys=["action"], spec=spec)
    x = torch.randn(5, 2) * 3
    out = m(TensorDict(param=x, batch_size=[5]))["action"]
    expected = spec.low + (spec.high - spec.low) * (torch.tanh(x) + 1) / 2
    torch.testing.assert_close(out, expected)
    # default: plain tanh
    out = TanhModule(in_keys=["p"])(TensorDict(p=x.clone(), batch_size=[5]))["p"]
    torch.testing.assert_close(out, torch.tanh(x))


def test_tanh_module_refuses_inconsistent_bounds():
    from torchrl_lite.modules import TanhModule

    with pytest.raises(ValueError, match="does not match the spec"):
        TanhModule(in_keys=["p"], spec=Bounded(-1.0, 1.0, (1,)), low=-2.0)
    with pytest.raises(ValueError, match="same length"):
        TanhModule(in_keys=["p"], out_keys=["a", "b"])
    with pytest.raises(ValueError, match="high"):
        TanhModule(in_keys=["p"], low=1.0, high=-1.0)


# -- get_logger --------------------------------------------------------------------------------
def test_get_logger_csv_ignores_wandb_kwargs_and_empty_backend_is_none(tmp_path):
    from torchrl_lite.record.loggers import get_logger

    logger = get_logger(
        "csv",
        logger_name=str(tmp_path),
        experiment_name="exp",
        wandb_kwargs={"project": "p", "config": {}},
    )
    logger.log_scalar("loss", 1.5, step=3)
    logger.close()
    text = "".join(p.read_text() for p in tmp_path.rglob("*.csv"))
    assert "1.5" in text
    assert get_logger("", logger_name="x", experiment_name="y") is None
    with pytest.raises(TypeError):
        get_logger("csv", logger_name=str(tmp_path), experiment_name="e", not_an_option=1)


# -- collector compile options ------------------------------------------------------------------
def test_collector_compile_policy_false_and_cudagraph_refused():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.collectors import Collector
    from torchrl_lite.envs import GymEnv

    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    collector = Collector(
        GymEnv("Pendulum-v1"),
        policy,
        frames_per_batch=8,
        total_frames=8,
        compile_policy=False,
        cudagraph_policy=False,
    )
    assert next(iter(collector)).batch_size == (8,)
    collector.shutdown()
    with pytest.raises(TypeError, match="cudagraph_policy must be"):
        Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=8, cudagraph_policy="yes")
    with pytest.raises(TypeError, match="compile_policy must be"):
        Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=8, compile_policy="yes")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only behaviour")
def test_collector_cudagraph_policy_without_cuda_runs_the_policy_as_it_is():
    """TorchRL's CUDA-graph wrapper passes calls through on a machine without CUDA (with a
    warning); so does ours: the batch equals one collected with cudagraph_policy=False."""
    from tensordict.nn import TensorDictModule

    from torchrl_lite.collectors import Collector
    from torchrl_lite.envs import GymEnv

    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    batches = []
    for option in (False, True, {"warmup": 5}):
        env = GymEnv("Pendulum-v1")
        env.set_seed(3)
        if option:
            with pytest.warns(UserWarning, match="without CUDA: the policy runs as it is"):
                collector = Collector(env, policy, frames_per_batch=8, total_frames=8,
                                      cudagraph_policy=option)  # fmt: skip
        else:
            collector = Collector(env, policy, frames_per_batch=8, total_frames=8)
        batches.append(next(iter(collector)))
        collector.shutdown()
    for batch in batches[1:]:
        torch.testing.assert_close(batch["action"], batches[0]["action"])
        torch.testing.assert_close(batch["next", "observation"], batches[0]["next", "observation"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_collector_cudagraph_policy_on_cuda_is_refused():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.collectors import Collector
    from torchrl_lite.envs import GymEnv

    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    with pytest.raises(ValueError, match="not supported by torchrl_lite's collectors on a CUDA"):
        Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=8, cudagraph_policy=True)


# -- EnvBase.specs ----------------------------------------------------------------------------
def test_env_specs_nests_input_and_output_specs_as_torchrl():
    from torchrl_lite.envs import GymEnv

    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    specs = env.specs
    assert specs["input_spec", "full_action_spec", "action"] == env.action_spec
    assert specs["output_spec", "full_observation_spec"] == env.full_observation_spec
    assert specs["output_spec", "full_reward_spec"] == env.full_reward_spec
    assert specs["output_spec", "full_done_spec"] == env.full_done_spec
    assert specs["input_spec", "full_action_spec", "action"].space.n == 2


# -- value estimators and exploration modules take TorchRL's device= -------------------------
def test_value_estimator_and_ou_module_accept_device():
    from torchrl_lite.modules import OrnsteinUhlenbeckProcessModule
    from torchrl_lite.objectives.value import GAE

    gae = GAE(gamma=0.9, lmbda=0.9, value_network=None, device="cpu")
    assert gae.device == torch.device("cpu")
    ou = OrnsteinUhlenbeckProcessModule(spec=Bounded(-1.0, 1.0, (2,)), device="cpu", safe=False)
    assert ou.x0.device == torch.device("cpu")
    with pytest.raises(RuntimeError):
        GAE(gamma=0.9, lmbda=0.9, value_network=None, device="not-a-device")


# -- BatchRenorm1d --------------------------------------------------------------------------
def test_batch_renorm_is_batch_norm_during_warmup_then_renormalizes():
    from torchrl_lite.modules.models.batchrenorm import BatchRenorm1d

    torch.manual_seed(0)
    bn = BatchRenorm1d(3, momentum=0.5, warmup_steps=2)
    ref = torch.nn.BatchNorm1d(3, momentum=0.5)
    x = torch.randn(16, 3) * 2 + 1
    torch.testing.assert_close(bn(x), ref(x))  # warm-up: plain batch norm, same running stats
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)
    bn(x)
    # after warm-up: (x - mu_B) / sigma_B * r + d with r, d from the running statistics
    x2 = torch.randn(16, 3) * 3 - 2
    mu, var = bn.running_mean.clone(), bn.running_var.clone()
    sigma = (var + bn.eps).sqrt()
    mu_b, sigma_b = x2.mean(0), (x2.var(0, unbiased=False) + bn.eps).sqrt()
    r = (sigma_b / sigma).clamp(1 / 3, 3)
    d = ((mu_b - mu) / sigma).clamp(-5, 5)
    torch.testing.assert_close(bn(x2), (x2 - mu_b) / sigma_b * r + d)
    bn.eval()
    sigma = (bn.running_var + bn.eps).sqrt()
    torch.testing.assert_close(bn(x2), (x2 - bn.running_mean) / sigma)
    with pytest.raises(ValueError, match=r"\[N, 3"):
        bn(torch.randn(4, 5))


# -- collectors: update_at_each_batch, trust_policy; buffers: compilable ----------------------
def test_collector_update_at_each_batch_syncs_the_policy_copy():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.collectors import Collector
    from torchrl_lite.envs import GymEnv

    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    calls = []

    class Counting(Collector):
        def update_policy_weights_(self, weights=None):
            calls.append(self._frames)
            return super().update_policy_weights_(weights)

    collector = Counting(
        GymEnv("Pendulum-v1"),
        policy,
        frames_per_batch=4,
        total_frames=12,
        update_at_each_batch=True,
        trust_policy=True,
    )
    assert [b.numel() for b in collector] == [4, 4, 4]
    assert calls == [0, 4, 8]  # before each batch
    collector.shutdown()


def test_storages_and_buffers_accept_compilable():
    from torchrl_lite.data import LazyMemmapStorage, LazyTensorStorage, TensorDictReplayBuffer

    storage = LazyTensorStorage(8, compilable=True, device="cpu")
    rb = TensorDictReplayBuffer(storage=storage, batch_size=2, compilable=True)
    rb.extend(TensorDict(x=torch.arange(4.0), batch_size=[4]))
    assert rb.compilable and storage.compilable
    assert rb.sample()["x"].shape == (2,)
    assert LazyMemmapStorage(4, compilable=False).compilable is False


# -- RND -----------------------------------------------------------------------------------------
def test_running_mean_std_matches_the_whole_stream():
    from torchrl_lite.envs.transforms.rnd import RunningMeanStd

    torch.manual_seed(0)
    chunks = [torch.randn(7, 3) * 2 + 1 for _ in range(4)]
    rms = RunningMeanStd((3,), epsilon=1e-8)
    for c in chunks:
        rms.update(c)
    data = torch.cat(chunks)
    torch.testing.assert_close(rms.mean, data.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rms.var, data.var(0, unbiased=False), rtol=1e-4, atol=1e-4)


def test_rnd_transform_writes_the_prediction_error_and_loss_trains_it():
    from torchrl_lite.envs import GymEnv, RNDTransform, TransformedEnv
    from torchrl_lite.objectives.rnd import RNDLoss

    torch.manual_seed(0)
    target, predictor = torch.nn.Linear(3, 4), torch.nn.Linear(3, 4)
    t = RNDTransform(target, predictor, normalize_obs=False, normalize_reward=False)
    env = TransformedEnv(GymEnv("Pendulum-v1"), t)
    assert "intrinsic_reward" in env.full_reward_spec.keys()
    env.set_seed(0)
    td = env.rollout(6)
    obs = td["next", "observation"]
    expected = (predictor(obs) - target(obs)).pow(2).mean(-1, keepdim=True)
    torch.testing.assert_close(td["next", "intrinsic_reward"], expected.detach())
    assert not any(p.requires_grad for p in target.parameters())
    loss = RNDLoss(predictor, target, update_fraction=1.0)
    out = loss(td)
    torch.testing.assert_close(out["loss_predictor"], expected.mean())
    out["loss_predictor"].backward()
    assert predictor.weight.grad is not None
    with pytest.raises(ValueError, match="update_fraction"):
        RNDLoss(predictor, target, update_fraction=1.5)


# -- env.train()/eval(), spec[(0,)], TanhNormal(safe_tanh=) ------------------------------------
def test_env_eval_and_train_reach_the_transforms():
    from torchrl_lite.envs import GymEnv, RNDTransform, TransformedEnv

    t = RNDTransform(torch.nn.Linear(3, 2), torch.nn.Linear(3, 2), normalize_obs=False)
    env = TransformedEnv(GymEnv("Pendulum-v1"), t)
    assert env.eval() is env and not env.training and not t.training
    before = t.reward_rms.count.clone()
    env.rollout(3)
    torch.testing.assert_close(t.reward_rms.count, before)  # frozen statistics in eval mode
    env.train()
    assert env.training and t.training and env.base_env.training
    env.rollout(3)
    assert t.reward_rms.count > before


def test_spec_indexed_with_a_tuple_of_ints_takes_rows_in_turn():
    from torchrl_lite.envs import GymEnv

    env = GymEnv("CartPole-v1", num_envs=2)
    spec = env.action_spec  # [2, 2] one-hot
    assert spec[(0,)] == spec[0]
    assert spec[()] is spec
    with pytest.raises(TypeError, match="takes an int"):
        spec["a"]


def test_tanh_normal_accepts_safe_tanh_and_stays_inside_the_bounds():
    from torchrl_lite.modules import TanhNormal

    for safe in (True, False):
        dist = TanhNormal(
            torch.zeros(100, 1), torch.full((100, 1), 20.0), low=-2.0, high=2.0, safe_tanh=safe
        )
        a = dist.sample()
        assert a.abs().max() <= 2.0 and dist.log_prob(a).isfinite().all()


# -- REDQ script stack -------------------------------------------------------------------------
def test_redq_script_import_paths_resolve():
    from torchrl_lite.data.utils import DEVICE_TYPING
    from torchrl_lite.trainers import LogValidationReward as hook
    from torchrl_lite.trainers.trainers import LogValidationReward, ReplayBufferTrainer, Trainer

    assert LogValidationReward is hook and ReplayBufferTrainer.__name__ == "ReplayBufferTrainer"
    assert Trainer.__name__ == "Trainer"
    assert torch.device in DEVICE_TYPING.__args__
    import torchrl_lite.trainers.trainers as tt

    with pytest.raises(AttributeError, match="no attribute 'NotAHook'"):
        tt.NotAHook  # noqa: B018


def test_sync_collector_helpers_group_env_constructors():
    from torchrl_lite.collectors import MultiaSyncDataCollector, MultiSyncDataCollector
    from torchrl_lite.envs import GymEnv
    from torchrl_lite.trainers.helpers import sync_async_collector, sync_sync_collector
    from torchrl_lite.trainers.helpers.collectors import _group_env_fns

    def make():
        return GymEnv("Pendulum-v1")

    fns, kws = _group_env_fns(make, {}, 1, 3, "t")
    assert fns == [make] * 3 and kws == [{}, {}, {}]
    fns, kws = _group_env_fns([make] * 4, None, 2, None, "t")
    assert len(fns) == 2 and kws is None and fns[0]().batch_size == (2,)
    with pytest.raises(ValueError, match="pass both"):
        _group_env_fns(make, {}, None, 2, "t")
    c = sync_sync_collector(
        make,
        {},
        None,
        num_env_per_collector=1,
        num_collectors=2,
        frames_per_batch=8,
        total_frames=8,
    )
    assert isinstance(c, MultiSyncDataCollector) and c.num_workers == 2
    assert next(iter(c)).numel() == 8
    c.shutdown()
    c = sync_async_collector(
        make,
        {},
        None,
        num_env_per_collector=1,
        num_collectors=2,
        frames_per_batch=8,
        total_frames=8,
    )
    assert isinstance(c, MultiaSyncDataCollector)
    c.shutdown()


def test_safe_tanh_transform_round_trips_at_the_bounds():
    from torchrl_lite.modules.distributions.continuous import SafeTanhTransform

    t = SafeTanhTransform()
    x = torch.tensor([-40.0, -1.0, 0.0, 0.5, 40.0])
    y = t(x)
    assert (y.abs() < 1).all()
    torch.testing.assert_close(t.inv(y)[1:4], x[1:4])
    assert t.inv(y).isfinite().all()


def test_ddpg_cnn_nets_shapes_and_action_input():
    from torchrl_lite.modules import DdpgCnnActor, DdpgCnnQNet

    actor = DdpgCnnActor(3)
    action, hidden = actor(torch.zeros(2, 3, 64, 64))
    assert action.shape == (2, 3) and hidden.shape == (2, 64)
    q = DdpgCnnQNet()
    obs = torch.randn(2, 3, 32, 32)
    v1, v2 = q(obs, torch.zeros(2, 3)), q(obs, torch.ones(2, 3))
    assert v1.shape == (2, 1) and not torch.equal(v1, v2)  # the action reaches the MLP


def test_gsde_module_matches_its_formula_and_noise_primer():
    from torchrl_lite.envs import GymEnv, TransformedEnv, gSDENoise
    from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
    from torchrl_lite.modules.models.exploration import LazygSDEModule

    torch.manual_seed(0)
    m = LazygSDEModule()
    mu, state, eps = torch.randn(4, 2), torch.randn(4, 3), torch.randn(4, 2, 3)
    with set_exploration_type(ExplorationType.RANDOM):
        _, std, action, eps_out = m(mu, state, eps)
    sigma = torch.nn.functional.softplus(m.log_sigma).clamp(0.01, 10.0)
    expected = mu + torch.einsum("bas,bs->ba", sigma * eps, state)
    torch.testing.assert_close(action, expected)
    torch.testing.assert_close(std, (sigma * state[:, None, :]).pow(2).sum(-1).sqrt())
    assert eps_out is eps
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(m(mu, state, eps)[2], mu)
    env = TransformedEnv(GymEnv("Pendulum-v1"), gSDENoise(action_dim=1, state_dim=3))
    td = env.rollout(4)
    assert td["_eps_gSDE"].shape == (4, 1, 3)
    assert (td["_eps_gSDE"] == td["_eps_gSDE"][0]).all()  # constant within the episode


def test_env_creator_function_builds_an_env_creator():
    from torchrl_lite.envs import EnvCreator, GymEnv, env_creator

    make = env_creator(lambda: GymEnv("Pendulum-v1"))
    assert isinstance(make, EnvCreator)
    env = make()
    assert env.observation_spec["observation"].shape == (3,)
    env.close()


def test_seed_era_module_paths_for_transforms_and_models():
    import torchrl_lite.envs.transforms.transforms as tt
    import torchrl_lite.modules.models.models as mm
    from torchrl_lite.envs import StepCounter, gSDENoise
    from torchrl_lite.modules import DdpgCnnActor

    assert tt.StepCounter is StepCounter and tt.gSDENoise is gSDENoise
    assert mm.DdpgCnnActor is DdpgCnnActor
    with pytest.raises(AttributeError, match="NoSuchTransform"):
        tt.NoSuchTransform  # noqa: B018
    with pytest.raises(AttributeError, match="NoSuchModel"):
        mm.NoSuchModel  # noqa: B018
