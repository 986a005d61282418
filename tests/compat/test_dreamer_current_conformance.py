"""What current TorchRL's Dreamer script needs beyond the Dreamer modules: the
``PolicyVersion`` transform, collectors that track the policy's version
(``track_policy_version=``, ``increment_version()``) and write into a replay buffer
(``replay_buffer=``, with ``start()`` in the background), and ``ReplayBuffer.write_count``."""

import functools
import time

import pytest
import torch

import torchrl_lite.envs.llm as llm
from tests.collectors.helpers import CountingEnv, constant_policy
from torchrl_lite.collectors import Collector, MultiaSyncDataCollector, SyncDataCollector
from torchrl_lite.data.replay_buffers import LazyTensorStorage, ReplayBuffer
from torchrl_lite.envs import PendulumEnv, SerialEnv, TransformedEnv
from torchrl_lite.envs.llm.transforms import PolicyVersion
from torchrl_lite.envs.utils import check_env_specs


# -- PolicyVersion -------------------------------------------------------------------
def test_policy_version_counts_bumps_and_keeps_their_history():
    version = PolicyVersion(version_type="int")
    assert version.version == 0
    version.increment_version()
    version.increment_version()
    assert version.version == 2
    assert [(c.old_version, c.new_version) for c in version.version_history] == [
        (None, 0),
        (0, 1),
        (1, 2),
    ]
    assert PolicyVersion(int).version == 0  # the type itself is accepted too


def test_policy_version_stamps_every_reset_and_step_with_the_current_version():
    version = PolicyVersion("int")
    env = TransformedEnv(SerialEnv(2, [PendulumEnv, PendulumEnv]), version)
    check_env_specs(env)
    first = env.rollout(3)
    assert first["policy_version"].shape == (2, 3)
    assert first["policy_version"].dtype == torch.int64
    assert (first["next", "policy_version"] == 0).all()
    version.increment_version()
    second = env.rollout(2)
    assert (second["policy_version"] == 1).all() and (second["next", "policy_version"] == 1).all()


def test_policy_version_uuid_versions_are_fresh_strings_but_not_stamped():
    version = PolicyVersion("uuid")
    before = version.version
    version.increment_version()
    assert isinstance(before, str) and isinstance(version.version, str)
    assert before != version.version and len(version.version_history) == 2
    with pytest.raises(TypeError, match=r"UUID versions are strings.*PolicyVersion\('int'\)"):
        TransformedEnv(PendulumEnv(), version)


def test_policy_version_rejects_unknown_types_and_badly_typed_versions():
    with pytest.raises(ValueError, match=r"version_type must be 'int'.*got 'float'"):
        PolicyVersion("float")
    version = PolicyVersion("int")
    with pytest.raises(TypeError, match=r"a version must be a int, got '3'"):
        version.version = "3"
    version.version = 7
    assert version.version == 7


def test_envs_llm_holds_only_the_non_llm_transform():
    assert llm.PolicyVersion is PolicyVersion
    assert llm.__all__ == ["PolicyVersion"]
    assert "no language-model envs" in llm.__doc__


# -- track_policy_version on the collectors ------------------------------------------
def test_sync_collector_stamps_frames_and_bumps_on_each_weight_update():
    policy = constant_policy()
    collector = SyncDataCollector(
        CountingEnv(3), policy, frames_per_batch=4, track_policy_version=True
    )
    assert isinstance(collector.policy_version_tracker, PolicyVersion)
    first = collector.next()
    assert first["next", "policy_version"].tolist() == [0, 0, 0, 0]
    collector.update_policy_weights_()
    assert collector.policy_version == 1
    second = collector.next()
    assert (second["next", "policy_version"] == 1).all()
    collector.increment_version()
    assert collector.get_policy_version() == 2
    assert (collector.next()["next", "policy_version"] == 2).all()
    collector.shutdown()


def test_sync_collector_uses_the_given_tracker_and_saves_its_version():
    version = PolicyVersion("int")
    collector = SyncDataCollector(
        CountingEnv(3), constant_policy(), frames_per_batch=2, track_policy_version=version
    )
    assert collector.policy_version_tracker is version
    collector.update_policy_weights_()
    state = collector.state_dict()
    assert state["policy_version"] == 1
    other = SyncDataCollector(
        CountingEnv(3), constant_policy(), frames_per_batch=2, track_policy_version=True
    )
    other.load_state_dict(state)
    assert other.policy_version == 1
    collector.shutdown()
    other.shutdown()


def test_collectors_without_tracking_have_no_version():
    collector = SyncDataCollector(CountingEnv(3), constant_policy(), frames_per_batch=2)
    collector.increment_version()  # nothing to bump
    assert collector.policy_version is None
    assert "policy_version" not in collector.next().keys()
    collector.shutdown()


def test_track_policy_version_rejects_other_values():
    with pytest.raises(TypeError, match=r"track_policy_version must be True, False or a Pol"):
        SyncDataCollector(CountingEnv(3), None, frames_per_batch=2, track_policy_version="int")


def test_async_collector_workers_stamp_the_weight_updates_they_loaded():
    version = PolicyVersion("int")
    collector = Collector(
        CountingEnv,
        constant_policy(),
        num_collectors=1,
        sync=False,
        frames_per_batch=4,
        track_policy_version=version,
    )
    assert isinstance(collector, MultiaSyncDataCollector)
    assert collector.policy_version_tracker is version
    assert (collector.next()["next", "policy_version"] == 0).all()
    collector.update_policy_weights_()
    collector.increment_version()  # the parent's tracker, as TorchRL's Dreamer does
    assert version.version == 1
    seen = set()
    for _ in range(4):  # a batch in flight may still carry the old weights' version
        seen |= set(collector.next()["next", "policy_version"].tolist())
    assert seen <= {0, 1} and 1 in seen
    collector.shutdown()


# -- replay_buffer= --------------------------------------------------------------------
def _collect_then_extend(n_batches, frames_per_batch):
    rb = ReplayBuffer(storage=LazyTensorStorage(n_batches * frames_per_batch))  # no wrap
    collector = SyncDataCollector(CountingEnv(3), constant_policy(), frames_per_batch=4)
    for _ in range(n_batches):
        rb.extend(collector.next())
    collector.shutdown()
    return rb


def test_collector_replay_buffer_holds_exactly_the_collected_frames():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = SyncDataCollector(
        CountingEnv(3), constant_policy(), frames_per_batch=4, total_frames=12, replay_buffer=rb
    )
    assert list(collector) == [None, None, None]
    reference = _collect_then_extend(3, 4)
    assert len(rb) == len(reference) == 12 and rb.write_count == 12
    assert torch.equal(rb[:]["count"], reference[:]["count"])
    assert torch.equal(rb[:]["next", "reward"], reference[:]["next", "reward"])
    assert torch.equal(rb[:]["collector", "traj_ids"], reference[:]["collector", "traj_ids"])


def test_async_collector_started_in_the_background_fills_the_buffer():
    # the worker writes until the shutdown: on a loaded machine that can be hundreds of
    # frames, so neither buffer may wrap (storage order would then differ from write order)
    rb = ReplayBuffer(storage=LazyTensorStorage(100_000))
    collector = Collector(
        functools.partial(CountingEnv, 3),
        constant_policy(),
        num_collectors=1,
        sync=False,
        frames_per_batch=4,
        total_frames=-1,
        replay_buffer=rb,
        track_policy_version=PolicyVersion("int"),
    )
    collector.start()
    deadline = time.monotonic() + 60
    while rb.write_count < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    collector.async_shutdown()
    n = len(rb)
    assert 12 <= n < 100_000 and n % 4 == 0 and rb.write_count == n
    reference = _collect_then_extend(n // 4, 4)
    assert torch.equal(rb[:]["count"], reference[:]["count"])
    assert torch.equal(rb[:]["next", "reward"], reference[:]["next", "reward"])
    assert (rb[:]["next", "policy_version"] == 0).all()


# -- ReplayBuffer.write_count ------------------------------------------------------------
def test_write_count_counts_every_item_written_including_overwritten_ones():
    from tensordict import TensorDict

    rb = ReplayBuffer(storage=LazyTensorStorage(5))
    written = 0
    for n in (3, 4, 2):
        rb.extend(TensorDict(x=torch.zeros(n, 1), batch_size=[n]))
        written += n
        assert rb.write_count == written
    rb.add(TensorDict(x=torch.zeros(1), batch_size=[]))
    assert rb.write_count == written + 1 and len(rb) == 5
    rb.empty()
    assert rb.write_count == 0


def test_write_count_counts_frames_of_multi_dim_rows():
    from tensordict import TensorDict

    rb = ReplayBuffer(storage=LazyTensorStorage(60, ndim=2))
    rb.extend(TensorDict(x=torch.zeros(2, 10, 1), batch_size=[2, 10]))  # [envs, time]
    rb.extend(TensorDict(x=torch.zeros(2, 10, 1), batch_size=[2, 10]))
    assert rb.write_count == 40 == len(rb)


# -- the Dreamer networks in current TorchRL's call forms ------------------------------
def _copy_weights(src, dst):
    dst.load_state_dict(src.state_dict())
    return dst


def test_obs_encoder_in_channels_form_is_our_encoder():
    from torchrl_lite.modules import ObsEncoder

    theirs = ObsEncoder(channels=4, in_channels=1, device="cpu")  # width 4, grey images
    ours = _copy_weights(theirs, ObsEncoder(channels=1, depth=4))
    pixels = torch.rand(2, 3, 1, 64, 64)
    assert torch.equal(theirs(pixels), ours(pixels)) and theirs(pixels).shape == (2, 3, 128)
    lazy = ObsEncoder(channels=4, num_layers=4)  # image channels read at the first call
    assert lazy(torch.rand(2, 3, 64, 64)).shape == (2, 128)
    with pytest.raises(ValueError, match=r"num_layers=3.*pass num_layers=4"):
        ObsEncoder(channels=4, num_layers=3, in_channels=3)


def test_obs_decoder_latent_dim_form_is_our_decoder():
    from torchrl_lite.modules import ObsDecoder

    theirs = ObsDecoder(channels=4, latent_dim=10, out_channels=1, device="cpu")
    assert not isinstance(theirs.linear.weight, torch.nn.parameter.UninitializedParameter)
    ours = _copy_weights(theirs, ObsDecoder(in_features=10, channels=1, depth=4))
    state, belief = torch.randn(2, 4), torch.randn(2, 6)
    out = theirs(state, belief)
    assert out.shape == (2, 1, 64, 64)
    assert torch.equal(out, ours(torch.cat([state, belief], -1)))


def test_rssm_prior_and_posterior_take_sizes_device_and_given_noise():
    from torchrl_lite.modules import RSSMPosterior, RSSMPrior

    prior = RSSMPrior(hidden_dim=8, rnn_hidden_dim=8, state_dim=4, action_dim=2, device="cpu")
    state, belief, action = torch.randn(3, 4), torch.randn(3, 8), torch.randn(3, 2)
    noise = torch.randn(3, 4)
    mean, std, sampled, new_belief = prior(state, belief, action, noise=noise)
    torch.testing.assert_close(sampled, mean + std * noise)
    assert torch.equal(prior(state, belief, action, noise=noise)[2], sampled)
    posterior = RSSMPosterior(
        hidden_dim=8, state_dim=4, rnn_hidden_dim=8, obs_embed_dim=6, device="cpu"
    )
    assert posterior.net[0].in_features == 14  # sized up front, not lazily
    embed = torch.randn(3, 6)
    mean, std, sampled = posterior(belief=new_belief, obs_embedding=embed, noise=noise)
    torch.testing.assert_close(sampled, mean + std * noise)
    with pytest.raises(ValueError, match="pass action_spec or action_dim"):
        RSSMPrior(hidden_dim=8, rnn_hidden_dim=8, state_dim=4)


def _rollout_modules(**rollout_kwargs):
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules import RSSMPosterior, RSSMPrior, RSSMRollout

    torch.manual_seed(0)
    prior = RSSMPrior(hidden_dim=8, rnn_hidden_dim=8, state_dim=4, action_dim=1)
    posterior = RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=8, obs_embed_dim=5)
    # the current script's wiring: keyword in_keys, the noise read when present
    prior_td = TensorDictModule(
        prior,
        in_keys={"state": "state", "belief": "belief", "action": "action", "noise": "prior_noise"},
        out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")],
        out_to_in_map=True,
    )
    posterior_td = TensorDictModule(
        posterior,
        in_keys={
            "belief": ("next", "belief"),
            "obs_embedding": ("next", "encoded_latents"),
            "noise": "posterior_noise",
        },
        out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")],
        out_to_in_map=True,
    )
    return RSSMRollout(prior_td, posterior_td, **rollout_kwargs)


def _rollout_batch(with_noise: bool):
    from tensordict import TensorDict

    gen = torch.Generator().manual_seed(1)
    data = {
        "state": torch.zeros(2, 3, 4),
        "belief": torch.zeros(2, 3, 8),
        "action": torch.randn(2, 3, 1, generator=gen),
        "next": TensorDict(encoded_latents=torch.randn(2, 3, 5, generator=gen), batch_size=[2, 3]),
    }
    if with_noise:
        data["prior_noise"] = torch.randn(2, 3, 4, generator=gen)
        data["posterior_noise"] = torch.randn(2, 3, 4, generator=gen)
    return TensorDict(data, batch_size=[2, 3])


def test_rssm_rollout_scan_and_compiled_step_give_the_plain_loop_result():
    plain = _rollout_modules()(_rollout_batch(True))
    other = _rollout_modules(use_scan=True, compile_step=True, compile_backend="eager")
    out = other(_rollout_batch(True))
    torch.testing.assert_close(out["next", "state"], plain["next", "state"])
    torch.testing.assert_close(out["next", "belief"], plain["next", "belief"])
    # with the noise given, the sampled states are the means moved by that noise
    expected = plain["next", "posterior_mean"] + plain["next", "posterior_std"] * plain[
        "posterior_noise"
    ].reshape(2, 3, 4)
    torch.testing.assert_close(plain["next", "state"], expected)
    # without noise entries the modules draw it themselves
    assert _rollout_modules()(_rollout_batch(False))["next", "state"].shape == (2, 3, 4)


def test_dreamer_actor_takes_a_device():
    from torchrl_lite.modules import DreamerActor

    actor = DreamerActor(2, depth=1, num_cells=8, device="cpu")
    loc, scale = actor(torch.zeros(3, 4), torch.zeros(3, 5))
    assert loc.shape == scale.shape == (3, 2) and (scale > 0).all()


# -- the replay buffer pieces of the script ----------------------------------------------
def test_exclude_transform_inverse_drops_on_the_way_in_only():
    from tensordict import TensorDict

    from torchrl_lite.envs import ExcludeTransform

    td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    t = ExcludeTransform("a", inverse=True)
    assert sorted(t(td.clone()).keys()) == ["a", "b"]
    assert sorted(t.inv(td).keys()) == ["b"]
    env = TransformedEnv(PendulumEnv(seed=0), ExcludeTransform("th", inverse=True))
    assert "th" in env.observation_spec.keys() and "th" in env.reset().keys()
    assert sorted(ExcludeTransform("a")(td.clone()).keys()) == ["b"]  # the default


def test_compose_wraps_plain_callables_as_function_transforms():
    import functools

    from tensordict import TensorDict

    from torchrl_lite.envs import Compose
    from torchrl_lite.envs.transforms.transforms import FunctionTransform

    def scale(td, factor):
        return td.set("x", td["x"] * factor)

    compose = Compose(functools.partial(scale, factor=3.0))
    assert isinstance(compose.transforms[0], FunctionTransform)
    out = compose(TensorDict(x=torch.ones(2), batch_size=[2]))
    assert out["x"].tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="Compose expects Transforms or callables, got int"):
        Compose(3)
    with pytest.raises(TypeError, match="FunctionTransform expects a callable, got str"):
        FunctionTransform("x")


def test_memmap_shared_init_and_slice_sampler_use_gpu_are_accepted_with_same_samples():
    from tensordict import TensorDict

    from torchrl_lite.data import LazyMemmapStorage, SliceSampler, TensorDictReplayBuffer

    def sample(**sampler_kwargs):
        storage = LazyMemmapStorage(40, shared_init=True)
        assert storage.shared_init
        rb = TensorDictReplayBuffer(
            storage=storage,
            sampler=SliceSampler(slice_len=4, traj_key="traj", **sampler_kwargs),
            batch_size=8,
        )
        traj = torch.arange(20) // 10
        rb.extend(TensorDict(traj=traj, x=torch.arange(20.0), batch_size=[20]))
        torch.manual_seed(3)
        return rb.sample()["x"]

    assert torch.equal(sample(use_gpu=False), sample())


def test_a_failed_background_collection_is_logged_at_once_and_raised_at_shutdown(caplog):
    import logging

    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = SyncDataCollector(
        CountingEnv(3, fail_at=6), constant_policy(), frames_per_batch=4, replay_buffer=rb
    )
    with caplog.at_level(logging.ERROR, logger="torchrl_lite"):
        collector.start()
        deadline = time.monotonic() + 30
        while collector._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
    # the loop waiting on the buffer learns why it stopped filling, before any shutdown
    assert rb.write_count == 4
    assert any(
        "background collection stopped" in r.getMessage() and "boom at step 6" in r.getMessage()
        for r in caplog.records
    )
    with pytest.raises(RuntimeError, match="background collection failed: ValueError: boom"):
        collector.async_shutdown()
