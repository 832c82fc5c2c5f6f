"""Spec 000 B9: TD-MPC2's Q ensemble (stacked members) and its random-pair reductions."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2.ensemble import Ensemble, pair_q, random_pair, reduce_pair
from ajax.agents.tdmpc2.networks import MLP
from ajax.distributional import TwoHot

NUM, IN, UNITS, BATCH = 5, 12, 128, 32
TWO_HOT = TwoHot.tdmpc2()
_pair_q = jax.jit(pair_q, static_argnums=(2, 3))  # one compilation per reduction


def _q_ensemble(num=NUM):
    member = MLP(2, UNITS, TWO_HOT.num_bins, out_scale=0.0, dropout=0.01)
    return Ensemble(member=member, num=num)


@pytest.fixture(scope="module")
def ensemble():
    module = _q_ensemble()
    x = jnp.asarray(np.random.default_rng(0).normal(size=(BATCH, IN)), jnp.float32)
    params = jax.jit(lambda k: module.init(k, x, deterministic=True))(jax.random.key(0))
    return module, params, x


def test_b9_members_distinct_and_independently_initialised(ensemble):
    """Each member draws its own key: kernels differ pairwise and are uncorrelated N(0, 0.02^2)."""
    _, params, _ = ensemble
    kernel = np.asarray(params["params"]["member"]["trunk"]["dense_0"]["kernel"])
    assert kernel.shape == (NUM, IN, UNITS)
    flat = kernel.reshape(NUM, -1)
    np.testing.assert_allclose(flat.std(axis=1), 0.02, rtol=0.1)
    corr = np.corrcoef(flat)
    off_diagonal = corr[~np.eye(NUM, dtype=bool)]
    assert np.all(np.abs(off_diagonal) < 0.1), off_diagonal
    for i, j in itertools.combinations(range(NUM), 2):
        assert not np.array_equal(flat[i], flat[j])


def test_b9_zero_final_layer_decodes_to_zero(ensemble):
    module, params, x = ensemble
    for deterministic in (True, False):
        logits = module.apply(
            params, x, deterministic=deterministic, rngs={"dropout": jax.random.key(1)}
        )
        assert logits.shape == (NUM, BATCH, TWO_HOT.num_bins)
        np.testing.assert_array_equal(TWO_HOT.decode(logits), 0.0)


def test_b9_dropout_masks_differ_across_members(ensemble):
    """Identical members and inputs: outputs differ only through each member's dropout mask.

    Dropout is a per-call choice. Spec 000's earlier rows had it off in the TD-target and planner
    passes; running the paper-era code (5f6fade) shows it on there (status note, "Usage map"), so
    the ensemble must apply it whenever asked, target parameters included.
    """
    module, params, x = ensemble
    rng = np.random.default_rng(2)

    def same_for_all(leaf):
        first = leaf[0]
        if leaf.ndim == 3 and leaf.shape[-1] == TWO_HOT.num_bins:  # give the head some weight
            first = jnp.asarray(rng.normal(size=first.shape) * 0.02, jnp.float32)
        return jnp.broadcast_to(first, leaf.shape)

    shared = jax.tree.map(same_for_all, params)
    det = module.apply(shared, x, deterministic=True)
    for m in range(1, NUM):
        np.testing.assert_array_equal(det[m], det[0])
    out = module.apply(shared, x, deterministic=False, rngs={"dropout": jax.random.key(3)})
    for i, j in itertools.combinations(range(NUM), 2):
        assert not np.allclose(out[i], out[j])
    again = module.apply(shared, x, deterministic=False, rngs={"dropout": jax.random.key(4)})
    assert not np.allclose(again, out)  # a fresh dropout key gives fresh masks


def test_b9_random_pair():
    keys = jax.random.split(jax.random.key(5), 300)
    pairs = np.asarray(jax.vmap(lambda k: random_pair(k, NUM))(keys))
    assert pairs.shape == (300, 2)
    assert np.all(pairs[:, 0] != pairs[:, 1])
    assert pairs.min() >= 0 and pairs.max() < NUM
    seen = {tuple(sorted(p)) for p in pairs.tolist()}
    assert seen == set(itertools.combinations(range(NUM), 2))
    two = np.asarray(jax.vmap(lambda k: random_pair(k, 2))(keys[:20]))
    assert all(set(p) == {0, 1} for p in two.tolist())
    with pytest.raises(ValueError, match="num >= 2"):
        random_pair(keys[0], 1)


def test_b9_same_pair_for_every_batch_element():
    """Member m, element b decodes to 10 m + b: the reduced value reveals one pair for all b."""
    values = 10.0 * jnp.arange(NUM)[:, None] + jnp.arange(6.0)[None, :]
    logits = jnp.log(TWO_HOT.encode(values))
    np.testing.assert_allclose(TWO_HOT.decode(logits), values, rtol=1e-5)
    for seed in range(4):
        key = jax.random.key(seed)
        i, j = np.asarray(random_pair(key, NUM))
        got_min = np.asarray(_pair_q(logits, key, TWO_HOT, "min")) - np.arange(6.0)
        got_avg = np.asarray(_pair_q(logits, key, TWO_HOT, "avg")) - np.arange(6.0)
        np.testing.assert_allclose(got_min, 10.0 * min(i, j), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got_avg, 5.0 * (i + j), rtol=1e-5, atol=1e-4)


def test_b9_reduce_decoded_not_logits():
    """Decoding each member, then 'min', differs from decoding the mean of the logits."""
    targets = TWO_HOT.encode(jnp.array([1.0, 100.0]))
    logits = 20.0 * (targets > 0.5)  # each member confident in one bin near its value
    decoded = TWO_HOT.decode(logits)
    q_min = _pair_q(logits, jax.random.key(0), TWO_HOT, "min")  # Nq = 2: the pair is {0, 1}
    q_avg = _pair_q(logits, jax.random.key(0), TWO_HOT, "avg")
    np.testing.assert_allclose(q_min, decoded.min(), rtol=1e-6)
    np.testing.assert_allclose(q_avg, decoded.mean(), rtol=1e-6)
    of_mean = TWO_HOT.decode(logits.mean(axis=0))
    assert abs(float(q_min) - float(of_mean)) > 5.0
    assert abs(float(q_avg) - float(of_mean)) > 5.0
    with pytest.raises(ValueError, match="unknown reduction"):
        reduce_pair(decoded, "max")
    with pytest.raises(ValueError, match="leading axis of 2"):
        reduce_pair(jnp.zeros((3, 4)), "min")
