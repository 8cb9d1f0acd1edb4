"""DaggerDistiller's loss: each objective by hand, composite heads, REPA, NaN labels, best_action, errors."""

import functools
import math

import pytest
import torch as th
from torch import nn
from torch.distributions import Bernoulli, Categorical, Independent, Normal, TanhTransform, TransformedDistribution

from sb3_xppo import DaggerDistiller, LossBreakdown, best_action, kl_loss, mse_loss, nll_loss
from sb3_xppo.dagger_distill import cosine_alignment_loss
from sb3_xppo.dagger_distill.objectives import logits_kl, reads_label

# Two states, hand-picked parameters: every expected value below is worked out from these numbers
S_LOGITS = th.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])
T_LOGITS = th.tensor([[0.0, 0.0, 3.0], [0.0, 2.0, 0.0]])  # teacher's best: 2 and 1
S_MU, S_STD = th.tensor([[0.5, -1.0], [0.0, 2.0]]), th.tensor([[1.0, 2.0], [0.5, 1.0]])
T_MU, T_STD = th.tensor([[1.0, 0.0], [0.0, 1.0]]), th.tensor([[0.5, 1.0], [1.0, 2.0]])
S_P, T_P = th.tensor([[0.2, 0.7], [0.5, 0.9]]), th.tensor([[0.6, 0.3], [0.9, 0.5]])  # teacher's best: [1, 0], [1, 0]


def _log_softmax(row: list[float]) -> list[float]:
    z = math.log(sum(math.exp(x) for x in row))
    return [x - z for x in row]


def _normal_logpdf(x: float, mu: float, std: float) -> float:
    return -((x - mu) ** 2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)


def _loss(student, teacher, loss_fn, states=None):
    states = th.zeros(2, 1) if states is None else states
    return DaggerDistiller(lambda s: student(), lambda s: teacher(), loss_fn=loss_fn)(states)[0]


def test_nll_categorical_by_hand():
    expected = -(_log_softmax([0.0, 1.0, 2.0])[2] + _log_softmax([1.0, 0.0, 0.0])[1]) / 2
    loss = _loss(lambda: Categorical(logits=S_LOGITS), lambda: Categorical(logits=T_LOGITS), nll_loss)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("independent", [False, True])
def test_nll_normal_by_hand(independent):
    # The label is the teacher's mean; per state the action dims are summed (Independent or not)
    expected = (
        -sum(_normal_logpdf(T_MU[i, j].item(), S_MU[i, j].item(), S_STD[i, j].item()) for i in range(2) for j in range(2)) / 2
    )

    def wrap(d):
        return Independent(d, 1) if independent else d

    loss = _loss(lambda: wrap(Normal(S_MU, S_STD)), lambda: wrap(Normal(T_MU, T_STD)), nll_loss)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_nll_bernoulli_by_hand():
    labels = [[1, 0], [1, 0]]  # teacher probs > 0.5
    expected = (
        -sum(math.log(S_P[i, j].item() if labels[i][j] else 1 - S_P[i, j].item()) for i in range(2) for j in range(2)) / 2
    )
    loss = _loss(lambda: Bernoulli(probs=S_P), lambda: Bernoulli(probs=T_P), nll_loss)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_kl_categorical_by_hand_and_reverse():
    def kl(p_logits, q_logits):
        lp, lq = _log_softmax(p_logits), _log_softmax(q_logits)
        return sum(math.exp(a) * (a - b) for a, b in zip(lp, lq, strict=True))

    s, t = S_LOGITS.tolist(), T_LOGITS.tolist()
    forward = (kl(t[0], s[0]) + kl(t[1], s[1])) / 2
    reverse = (kl(s[0], t[0]) + kl(s[1], t[1])) / 2
    student, teacher = lambda: Categorical(logits=S_LOGITS), lambda: Categorical(logits=T_LOGITS)
    assert _loss(student, teacher, kl_loss).item() == pytest.approx(forward, rel=1e-6)
    assert _loss(student, teacher, functools.partial(kl_loss, reverse=True)).item() == pytest.approx(reverse, rel=1e-6)
    assert forward != pytest.approx(reverse)


def test_kl_normal_by_hand():
    # KL(N(mt, st) || N(ms, ss)) = log(ss / st) + (st^2 + (mt - ms)^2) / (2 ss^2) - 1/2
    total = 0.0
    for i in range(2):
        for j in range(2):
            mt, st, ms, ss = T_MU[i, j].item(), T_STD[i, j].item(), S_MU[i, j].item(), S_STD[i, j].item()
            total += math.log(ss / st) + (st**2 + (mt - ms) ** 2) / (2 * ss**2) - 0.5
    loss = _loss(lambda: Normal(S_MU, S_STD), lambda: Normal(T_MU, T_STD), kl_loss)
    assert loss.item() == pytest.approx(total / 2, rel=1e-6)


def test_kl_bernoulli_by_hand():
    total = 0.0
    for i in range(2):
        for j in range(2):
            pt, ps = T_P[i, j].item(), S_P[i, j].item()
            total += pt * math.log(pt / ps) + (1 - pt) * math.log((1 - pt) / (1 - ps))
    loss = _loss(lambda: Bernoulli(probs=S_P), lambda: Bernoulli(probs=T_P), kl_loss)
    assert loss.item() == pytest.approx(total / 2, rel=1e-5)


def test_mse_by_hand():
    normal = ((S_MU - T_MU) ** 2).sum().item() / 2
    assert _loss(lambda: Normal(S_MU, S_STD), lambda: Normal(T_MU, T_STD), mse_loss).item() == pytest.approx(normal)
    bern = ((S_P - T_P) ** 2).sum().item() / 2
    assert _loss(lambda: Bernoulli(probs=S_P), lambda: Bernoulli(probs=T_P), mse_loss).item() == pytest.approx(bern)
    # Categorical: the mean of the one-hot action is the probability vector
    ps, pt = S_LOGITS.softmax(-1), T_LOGITS.softmax(-1)
    cat = ((ps - pt) ** 2).sum().item() / 2
    assert _loss(lambda: Categorical(logits=S_LOGITS), lambda: Categorical(logits=T_LOGITS), mse_loss).item() == pytest.approx(
        cat
    )


@pytest.mark.parametrize("loss_fn", [nll_loss, kl_loss, mse_loss])
def test_composite_heads_sum_and_loop_reference(loss_fn):
    """A nested pytree of heads: the loss is the sum over heads, averaged over states (checked state by state)."""
    th.manual_seed(0)
    b = 5
    params = dict(logits=th.randn(2, b, 3), mu=th.randn(2, b, 2), std=th.rand(2, b, 2) + 0.5, p=th.rand(2, b, 4) * 0.8 + 0.1)

    def policy(k, rows=slice(None)):
        return dict(
            move=Categorical(logits=params["logits"][k][rows]),
            arm=(Normal(params["mu"][k][rows], params["std"][k][rows]), Bernoulli(probs=params["p"][k][rows])),
        )

    states = th.zeros(b, 1)
    loss = DaggerDistiller(lambda s: policy(0), lambda s: policy(1), loss_fn=loss_fn)(states)[0]
    per_state = []
    for i in range(b):
        # Reference: one state at a time, each head on its own, plain Python sums
        student, teacher = policy(0, slice(i, i + 1)), policy(1, slice(i, i + 1))
        label = best_action(teacher)
        total = loss_fn(student["move"], teacher["move"], label["move"]).sum().item()
        for h in range(2):
            total += loss_fn(student["arm"][h], teacher["arm"][h], label["arm"][h]).sum().item()
        per_state.append(total)
    assert loss.item() == pytest.approx(sum(per_state) / b, rel=1e-5)


def test_seed_composite_and_structure_mismatch():
    def composite(s):
        return dict(buttons=Bernoulli(logits=s), arm=Normal(s, 1.0))

    loss, out = DaggerDistiller(composite, composite)(th.randn(8, 2))
    assert th.isfinite(loss) and set(out) == {"buttons", "arm"}
    with pytest.raises(ValueError, match="pytrees differ"):
        DaggerDistiller(composite, lambda s: dict(buttons=Bernoulli(logits=s)))(th.randn(8, 2))


def test_only_the_student_gets_gradients():
    student_net, teacher_net = nn.Linear(4, 3), nn.Linear(4, 3)
    distiller = DaggerDistiller(lambda s: Categorical(logits=student_net(s)), lambda s: Categorical(logits=teacher_net(s)))
    loss, student_out = distiller(th.randn(16, 4))
    loss.backward()
    assert student_net.weight.grad is not None and student_net.weight.grad.abs().sum() > 0
    assert teacher_net.weight.grad is None
    assert isinstance(student_out, Categorical)


def test_teacher_sample_labels_are_samples():
    # A near-uniform teacher: its samples differ from its mode, and they are what nll scores
    teacher_logits = th.zeros(64, 3)
    teacher_logits[:, 0] = 0.1
    student = Categorical(logits=th.randn(64, 3))
    distiller = DaggerDistiller(lambda s: student, lambda s: Categorical(logits=teacher_logits), teacher_sample=True)
    th.manual_seed(3)
    loss = distiller(th.zeros(64, 1))[0]
    th.manual_seed(3)
    labels = Categorical(logits=teacher_logits).sample()
    assert (labels != 0).any()
    assert loss.item() == pytest.approx(-student.log_prob(labels).mean().item(), rel=1e-6)


def test_entropy_weight_and_breakdown():
    student, teacher = Categorical(logits=S_LOGITS), Categorical(logits=T_LOGITS)
    distiller = DaggerDistiller(lambda s: student, lambda s: teacher, entropy_weight=0.1, return_loss_breakdown=True)
    breakdown, _ = distiller(th.zeros(2, 1))
    assert isinstance(breakdown, LossBreakdown)
    policy = -student.log_prob(th.tensor([2, 1])).mean()
    entropy = student.entropy().mean()
    assert breakdown.policy.item() == pytest.approx(policy.item(), rel=1e-6)
    assert breakdown.entropy.item() == pytest.approx(entropy.item(), rel=1e-6)
    assert breakdown.alignment.item() == 0
    assert breakdown.loss.item() == pytest.approx(policy.item() - 0.1 * entropy.item(), rel=1e-6)
    # Overridden per call
    loss, _ = distiller(th.zeros(2, 1), return_loss_breakdown=False)
    assert isinstance(loss, th.Tensor) and loss.ndim == 0


def test_label_transform_and_teacher_state_fn_in_the_env_free_call():
    seen = {}

    def teacher_state_fn(state, info, step):
        seen["info"], seen["step"] = info, step
        return state * 2

    distiller = DaggerDistiller(
        lambda s: Normal(s, 1.0),
        lambda s: Normal(s, 1.0),
        teacher_state_fn=teacher_state_fn,
        label_transform=lambda state, action, info, step: action + 1,
    )
    states = th.tensor([[1.0], [2.0]])
    loss = distiller(states)[0]
    # label = 2 * s + 1, nll of N(s, 1) = (s + 1)^2 / 2 + log(sqrt(2 pi))
    expected = ((states + 1) ** 2 / 2 + 0.5 * math.log(2 * math.pi)).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert seen == {"info": None, "step": 0}


class Net(nn.Module):
    def __init__(self, depth: int, width: int = 2) -> None:
        super().__init__()
        self.trunk = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())])
        self.head = nn.Linear(width, 2)

    def forward(self, s):
        return Normal(self.head(self.trunk(s)), 0.5)


def test_repa_alignment_by_hand():
    th.manual_seed(0)
    student, teacher = Net(2), Net(4)
    states = th.randn(6, 2)
    distiller = DaggerDistiller(student, teacher, student_layer="trunk.2", teacher_layer="trunk.6", rep_align_weight=0.5)
    breakdown, _ = distiller(states, return_loss_breakdown=True)
    s_feat = student.trunk[:3](states)
    t_feat = teacher.trunk[:7](states)
    cos = [
        sum(a * b for a, b in zip(x, y, strict=True)) / (math.hypot(*x) * math.hypot(*y))
        for x, y in zip(s_feat.tolist(), t_feat.tolist(), strict=True)
    ]
    expected = sum(1 - c for c in cos) / len(cos)
    assert breakdown.alignment.item() == pytest.approx(expected, rel=1e-5)
    assert breakdown.loss.item() == pytest.approx(breakdown.policy.item() + 0.5 * expected, rel=1e-5)
    # Gradients reach the student's trunk through the alignment alone
    distiller.rep_align_weight, student.head.weight.requires_grad = 1.0, False
    breakdown.alignment.backward()
    assert student.trunk[0].weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in teacher.parameters())
    # Modules work as well as names
    by_module = DaggerDistiller(student, teacher, student_layer=student.trunk[2], teacher_layer=teacher.trunk[6])
    assert by_module(states, return_loss_breakdown=True)[0].alignment.item() == pytest.approx(expected, rel=1e-5)


def test_repa_projector():
    th.manual_seed(0)
    student, teacher = Net(1, width=2), Net(1, width=2)
    teacher.trunk[0] = nn.Linear(2, 5)  # 5 teacher features against 2 student features
    teacher.trunk[1] = nn.Tanh()
    teacher.head = nn.Linear(5, 2)
    with pytest.raises(ValueError, match="rep_align_projector"):
        DaggerDistiller(student, teacher, student_layer="trunk.0", teacher_layer="trunk.0")(th.randn(4, 2))
    optimizer = th.optim.Adam(student.parameters(), lr=1e-2)
    distiller = DaggerDistiller(
        student, teacher, student_layer="trunk.0", teacher_layer="trunk.0", rep_align_projector=True, optimizer=optimizer
    )
    states = th.randn(32, 2)
    first = distiller(states, return_loss_breakdown=True)[0].alignment.item()
    assert isinstance(distiller.projector, nn.Linear) and distiller.projector.out_features == 5
    # The projector joined the optimizer and trains with the student
    assert any(p is distiller.projector.weight for g in optimizer.param_groups for p in g["params"])
    for _ in range(100):
        optimizer.zero_grad()
        distiller(states, return_loss_breakdown=True)[0].alignment.backward()
        optimizer.step()
    assert distiller(states, return_loss_breakdown=True)[0].alignment.item() < first / 2
    # A projector module given up front joins the optimizer built from params
    projector = nn.Linear(2, 5)
    with_params = DaggerDistiller(
        student,
        teacher,
        student_layer="trunk.0",
        teacher_layer="trunk.0",
        rep_align_projector=projector,
        params=student.parameters(),
    )
    assert any(p is projector.weight for g in with_params.optimizer.param_groups for p in g["params"])


def test_repa_errors_at_construction():
    student, teacher = Net(2), Net(4)
    with pytest.raises(ValueError, match=r"student_layer='trunk.9' is not a submodule"):
        DaggerDistiller(student, teacher, student_layer="trunk.9", teacher_layer="trunk.6")
    with pytest.raises(ValueError, match=r"teacher_layer='nope' is not a submodule"):
        DaggerDistiller(student, teacher, student_layer="trunk.2", teacher_layer="nope")
    with pytest.raises(TypeError, match=r"not an nn\.Module"):
        DaggerDistiller(lambda s: student(s), teacher, student_layer="trunk.2", teacher_layer="trunk.6")
    with pytest.raises(ValueError, match="both student_layer and teacher_layer"):
        DaggerDistiller(student, teacher, student_layer="trunk.2")
    unused = nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="was not called"):
        DaggerDistiller(student, teacher, student_layer=unused, teacher_layer="trunk.6")(th.randn(3, 2))


def test_nan_labels_are_masked():
    th.manual_seed(0)
    net = nn.Linear(3, 2)
    states = th.randn(6, 3)
    teacher_mu = th.randn(6, 2)
    teacher_mu[1, 0] = math.nan  # NaN teacher output
    teacher_mu[4] = math.inf  # infinite label
    # (torch's argument validation would reject the NaN teacher before the distiller sees it)
    distiller = DaggerDistiller(lambda s: Normal(net(s), 1.0), lambda s: Normal(teacher_mu, 1.0, validate_args=False))
    loss = distiller(states)[0]
    loss.backward()
    assert th.isfinite(loss)
    assert all(th.isfinite(p.grad).all() for p in net.parameters())
    # Equal to the loss over the usable states alone
    keep = [0, 2, 3, 5]
    expected = -Normal(net(states[keep]), 1.0).log_prob(teacher_mu[keep]).sum(-1).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    expected.backward()
    for g, p in zip(grads, net.parameters(), strict=True):
        assert th.allclose(g, p.grad, atol=1e-6)


@pytest.mark.parametrize("loss_fn", [nll_loss, kl_loss, mse_loss])
def test_nan_teacher_categorical_masked_for_every_objective(loss_fn):
    net = nn.Linear(2, 3)
    logits = th.randn(4, 3)
    logits[2] = math.nan
    distiller = DaggerDistiller(
        lambda s: Categorical(logits=net(s)), lambda s: Categorical(logits=logits, validate_args=False), loss_fn=loss_fn
    )
    loss = distiller(th.randn(4, 2))[0]
    loss.backward()
    assert th.isfinite(loss) and all(th.isfinite(p.grad).all() for p in net.parameters())


def test_no_usable_label_gives_nan_and_train_skips():
    net = nn.Linear(2, 2)
    teacher = lambda s: Normal(th.full((s.shape[0], 2), math.nan), 1.0, validate_args=False)  # noqa: E731
    distiller = DaggerDistiller(lambda s: Normal(net(s), 1.0), teacher, params=net.parameters())
    loss, _ = distiller(th.randn(4, 2))
    assert math.isnan(loss.item())
    distiller.dataset.add(states=th.randn(8, 2), labels=th.full((8, 2), math.nan))
    before = [p.clone() for p in net.parameters()]
    stats = distiller.train(epochs=1, batch_size=4)
    assert stats["skipped"] == 2 and stats["updates"] == 0
    assert all(th.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_best_action():
    assert best_action(Categorical(logits=S_LOGITS)).tolist() == [2, 0]
    # Bernoulli gives 0/1, also at p = 0.5 (torch's mode is NaN there)
    assert best_action(Bernoulli(probs=th.tensor([0.2, 0.5, 0.9]))).tolist() == [0.0, 0.0, 1.0]
    assert th.equal(best_action(Independent(Normal(T_MU, T_STD), 1)), T_MU)
    squashed = TransformedDistribution(Normal(T_MU, T_STD), [TanhTransform()])
    assert th.allclose(best_action(squashed), th.tanh(T_MU))
    tree = best_action(dict(a=Categorical(logits=T_LOGITS), b=(Bernoulli(probs=T_P), Normal(T_MU, 1.0))))
    assert tree["a"].tolist() == [2, 1] and tree["b"][0].tolist() == [[1, 0], [1, 0]] and th.equal(tree["b"][1], T_MU)
    assert tree["a"].dtype == th.long


def test_cosine_alignment_loss_by_hand():
    s = th.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    t = th.tensor([[2.0, 0.0], [-1.0, -1.0], [3.0, 0.0]])
    assert cosine_alignment_loss(s, t).tolist() == pytest.approx([0.0, 2.0, 1.0], abs=1e-6)


def test_constructor_errors():
    f = lambda s: Normal(s, 1.0)  # noqa: E731
    net = nn.Linear(1, 1)
    with pytest.raises(TypeError, match="loss_fn must be a callable"):
        DaggerDistiller(f, f, loss_fn="kl")
    with pytest.raises(TypeError, match="student must be a callable"):
        DaggerDistiller(3, f)
    with pytest.raises(ValueError, match="optimizer= or params=, not both"):
        DaggerDistiller(f, f, optimizer=th.optim.SGD(net.parameters(), lr=0.1), params=net.parameters())
    with pytest.raises(ValueError, match="beta must be a number in"):
        DaggerDistiller(f, f, beta=1.5)
    with pytest.raises(ValueError, match="batch_size must be None or an int >= 1"):
        DaggerDistiller(f, f, batch_size=0)
    with pytest.raises(TypeError, match="DaggerDistiller's beta is a number"):
        DaggerDistiller(f, f, beta=lambda progress: progress, env=object())
    with pytest.raises(TypeError, match="weight is an option of DaggerCallback, not of DaggerDistiller"):
        DaggerDistiller(f, f, weight=0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'not_an_option'"):
        DaggerDistiller(f, f, not_an_option=1)
    with pytest.raises(TypeError, match="buffer_size or max_dataset_size"):
        DaggerDistiller(f, f, buffer_size=8, max_dataset_size=8)
    with pytest.raises(ValueError, match="entropy_weight must be a number"):
        DaggerDistiller(f, f, entropy_weight=math.nan)
    with pytest.raises(TypeError, match="rep_align_projector"):
        DaggerDistiller(f, f, rep_align_projector="linear")
    with pytest.raises(TypeError, match="label_transform must be None or a callable"):
        DaggerDistiller(f, f, label_transform=1)
    with pytest.raises(ValueError, match="collect\\(\\) needs env="):
        DaggerDistiller(f, f).collect(1)
    with pytest.raises(ValueError, match="train\\(\\) needs optimizer="):
        DaggerDistiller(f, f).train()
    with pytest.raises(ValueError, match="elementwise loss with the batch"):
        DaggerDistiller(f, f, loss_fn=lambda s, t, a: (s.mean - a).square().mean())(th.randn(3, 1))


# ---------------------------------------------------------------------------------------------------------------------
# KL from logits, the Categorical NLL as cross-entropy
# ---------------------------------------------------------------------------------------------------------------------


def test_logits_kl_by_hand():
    # p = (1/2, 1/2) (logits 0, 0), q = (1/4, 3/4) (logits 0, log 3): KL(p || q) = 1/2 log 2 + 1/2 log(2/3) = 1/2 log(4/3)
    half_log = 0.5 * math.log(4 / 3)
    p, q = Categorical(logits=th.tensor([[0.0, 0.0]])), Categorical(logits=th.tensor([[0.0, math.log(3.0)]]))
    assert logits_kl(p, q).item() == pytest.approx(half_log, rel=1e-6)
    # The same two distributions as Bernoulli(1/2) and Bernoulli(3/4) (logits 0 and log 3)
    p, q = Bernoulli(logits=th.tensor([0.0])), Bernoulli(logits=th.tensor([math.log(3.0)]))
    assert logits_kl(p, q).item() == pytest.approx(half_log, rel=1e-6)
    # KL(q || p) = 1/4 log(1/2) + 3/4 log(3/2)
    assert logits_kl(q, p).item() == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5), rel=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_logits_kl_matches_torch_on_moderate_logits(reverse):
    """Categorical (one and two batch dims), Bernoulli, Independent Bernoulli (SB3's MultiBinary): torch's closed forms."""
    th.manual_seed(0)
    a, b = 3 * th.randn(6, 2, 5), 3 * th.randn(6, 2, 5)
    pairs = [
        (Categorical(logits=a[:, 0]), Categorical(logits=b[:, 0])),
        (Categorical(logits=a), Categorical(logits=b)),
        (Bernoulli(logits=a[:, 0]), Bernoulli(logits=b[:, 0])),
        (Independent(Bernoulli(logits=a), 2), Independent(Bernoulli(logits=b), 2)),
    ]
    for student, teacher in pairs:
        ours = kl_loss(student, teacher, reverse=reverse)
        p, q = (student, teacher) if reverse else (teacher, student)
        theirs = th.distributions.kl_divergence(p, q)
        assert ours.shape == theirs.shape
        th.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_logits_kl_is_finite_and_nonnegative_on_extreme_logits():
    # One-hot p on class 0 against q one-hot on class 1 (logits +-1e4): KL = log p_0 - log q_0 = 0 - (-2e4)
    p_logits = th.tensor([[1e4, -1e4, 0.0], [-1e8, 0.0, 1e8], [50.0, 50.0, 50.0]], requires_grad=True)
    q_logits = th.tensor([[-1e4, 1e4, 0.0], [0.0, -1e8, 3.0], [50.0, 50.0, 50.0]], requires_grad=True)
    kl = logits_kl(Categorical(logits=p_logits), Categorical(logits=q_logits))
    # Row 2: p = e_2, q_2 = 1 / (1 + e^-3) (e^-1e8 underflows): KL = log(1 + e^-3); row 3: equal distributions
    th.testing.assert_close(kl.detach(), th.tensor([2e4, math.log1p(math.exp(-3.0)), 0.0]))
    torch_kl = th.distributions.kl_divergence(Categorical(logits=p_logits), Categorical(logits=q_logits))
    assert th.isinf(torch_kl[0])  # torch's, from the probabilities, overflows where ours does not
    kl.sum().backward()
    assert th.isfinite(p_logits.grad).all() and th.isfinite(q_logits.grad).all()

    g = th.Generator().manual_seed(1)
    for scale in (1e2, 1e4, 1e8, 1e30):
        a, b = scale * th.randn(64, 4, generator=g), scale * th.randn(64, 4, generator=g)
        for kl in (
            logits_kl(Categorical(logits=a), Categorical(logits=b)),
            logits_kl(Bernoulli(logits=a), Bernoulli(logits=b)),
            logits_kl(Categorical(logits=a), Categorical(logits=a)),
        ):
            assert th.isfinite(kl).all() and (kl >= 0).all(), scale
    # A class p cannot take (logit -inf) adds nothing; one q cannot take while p can is an infinite KL
    masked = Categorical(logits=th.tensor([[0.0, -math.inf]]))
    assert logits_kl(masked, Categorical(logits=th.tensor([[0.0, 5.0]]))).item() == pytest.approx(math.log1p(math.exp(5.0)))
    assert logits_kl(Categorical(logits=th.tensor([[0.0, 0.0]])), masked).item() == math.inf
    # Bernoulli with a logit of 40 (p rounds to 1 in float32) against 1e9: the (1 - p) term still counts
    kl = logits_kl(Bernoulli(logits=th.tensor([40.0])), Bernoulli(logits=th.tensor([1e9])))
    assert kl.item() == pytest.approx(math.exp(-40.0) * (1e9 - 40.0), rel=1e-4)


def test_logits_kl_leaves_other_families_to_torch():
    normal = Normal(th.zeros(2), th.ones(2))
    assert logits_kl(normal, normal) is None
    assert (
        logits_kl(Independent(Bernoulli(logits=th.zeros(2, 3)), 1), Independent(Bernoulli(logits=th.zeros(2, 3, 1)), 2))
        is None
    )
    assert logits_kl(Categorical(logits=th.zeros(2, 3)), Bernoulli(logits=th.zeros(2))) is None


def test_categorical_nll_is_cross_entropy():
    th.manual_seed(0)
    logits = (5 * th.randn(7, 3, 4)).requires_grad_()
    labels = th.randint(4, (7, 3))
    loss = nll_loss(Categorical(logits=logits), None, labels)
    # Independent references: -log_softmax gathered at the label, and torch's own -log_prob
    gathered = -logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    th.testing.assert_close(loss, gathered)
    th.testing.assert_close(loss, -Categorical(logits=logits).log_prob(labels))
    (grad,) = th.autograd.grad(loss.sum(), logits)
    (reference,) = th.autograd.grad(gathered.sum(), logits)
    th.testing.assert_close(grad, reference)
    # Labels as floats (a label_transform's output) are class indices too; extreme logits stay finite
    th.testing.assert_close(nll_loss(Categorical(logits=logits), None, labels.float()), loss)
    extreme = nll_loss(Categorical(logits=th.tensor([[1e8, -1e8]])), None, th.tensor([1]))
    assert extreme.item() == pytest.approx(2e8)
    with pytest.raises(ValueError, match=r"class index in \[0, 4\)"):
        nll_loss(Categorical(logits=logits), None, th.full((7, 3), 4))
    with pytest.raises(ValueError, match="class index"):
        nll_loss(Categorical(logits=logits), None, th.full((7, 3), -1))


def test_reads_label():
    assert reads_label(nll_loss) and reads_label(lambda s, t, a: -s.log_prob(a))
    assert not reads_label(kl_loss) and not reads_label(mse_loss)
    assert not reads_label(functools.partial(kl_loss, reverse=True))
