"""What each registry case costs: wall and CPU seconds of its setup, its first call and
a later call, measured on the 2-core AMD EPYC box with AVX-512 (when, and the load then:
MEASURED) by ``python benchmarks/case_costs.py --write``, which rewrites this file; the
time budgets (``rlperf.bench.budget``) plan every tool's case set from it."""

from __future__ import annotations

from typing import NamedTuple


class CaseCost(NamedTuple):
    """Seconds (wall, CPU) of a case's setup, its first call and a later call."""

    setup_wall_s: float
    setup_cpu_s: float
    first_wall_s: float
    first_cpu_s: float
    call_wall_s: float
    call_cpu_s: float


MEASURED = "2026-11-29 00:44-00:56 UTC, commit 91f1018, load average 3-8 (other sessions' work)"
# fmt: off
COSTS: dict[str, CaseCost] = {
    "env_step[env=cartpole,num_envs=4]":
        CaseCost(0.003226, 0.003222, 0.0002334, 0.0002322, 3.232e-05, 3.241e-05),
    "env_step[env=cartpole,num_envs=64]":
        CaseCost(0.01159, 0.003579, 0.0002103, 0.0002087, 3.14e-05, 3.147e-05),
    "env_reset[env=cartpole,num_envs=64]":
        CaseCost(0.01165, 0.003014, 5.287e-05, 5.048e-05, 2.55e-05, 2.559e-05),
    "env_step[env=cartpole,num_envs=1024]":
        CaseCost(0.0244, 0.006371, 0.0003827, 0.0003806, 6.178e-05, 6.186e-05),
    "env_reset[env=cartpole,num_envs=1024]":
        CaseCost(0.01517, 0.00316, 6.458e-05, 6.23e-05, 3.951e-05, 3.952e-05),
    "env_step[env=catch,num_envs=4]":
        CaseCost(0.01568, 0.003687, 0.0001252, 0.0001226, 2.042e-05, 2.046e-05),
    "env_step[env=catch,num_envs=64]":
        CaseCost(0.01144, 0.00343, 0.0001322, 0.0001305, 2.18e-05, 2.186e-05),
    "env_reset[env=catch,num_envs=64]":
        CaseCost(0.01122, 0.002894, 7.041e-05, 7.032e-05, 4.145e-05, 4.156e-05),
    "env_step[env=catch,num_envs=1024]":
        CaseCost(0.0226, 0.006522, 0.0002358, 0.0002341, 4.014e-05, 4.016e-05),
    "env_reset[env=catch,num_envs=1024]":
        CaseCost(0.01151, 0.00349, 0.0001114, 0.0001113, 6.248e-05, 6.265e-05),
    "env_step[env=grid,num_envs=4]":
        CaseCost(0.02537, 0.008463, 0.0004116, 0.00041, 0.0001723, 0.000173),
    "env_step[env=grid,num_envs=64]":
        CaseCost(0.1334, 0.04526, 0.008985, 0.0009887, 0.0006244, 0.0006251),
    "env_reset[env=grid,num_envs=64]":
        CaseCost(0.09629, 0.03262, 0.02865, 0.00865, 0.02505, 0.008475),
    "env_step[env=grid,num_envs=1024]":
        CaseCost(2.391, 0.7762, 0.03921, 0.01225, 0.03064, 0.01171),
    "env_reset[env=grid,num_envs=1024]":
        CaseCost(1.052, 0.347, 0.3829, 0.1263, 0.4208, 0.1266),
    "env_step[env=petri,num_envs=4]":
        CaseCost(0.01573, 0.003727, 0.0001215, 0.0001203, 4.54e-05, 4.552e-05),
    "env_step[env=petri,num_envs=64]":
        CaseCost(0.01598, 0.003983, 0.00019, 0.0001887, 5.811e-05, 5.823e-05),
    "env_reset[env=petri,num_envs=64]":
        CaseCost(0.01569, 0.00369, 6.578e-05, 6.356e-05, 3.642e-05, 3.647e-05),
    "env_step[env=petri,num_envs=1024]":
        CaseCost(0.0282, 0.00824, 0.0005681, 0.0005663, 0.0002262, 0.0002265),
    "env_reset[env=petri,num_envs=1024]":
        CaseCost(0.01539, 0.005296, 0.0001326, 0.0001302, 0.0001227, 0.0001231),
    "env_step[env=robots,num_envs=4]":
        CaseCost(0.1248, 0.03836, 0.01234, 0.0003407, 8.762e-05, 8.774e-05),
    "env_step[env=robots,num_envs=64]":
        CaseCost(0.1796, 0.04972, 0.001136, 0.001134, 0.0001722, 0.0001728),
    "env_reset[env=robots,num_envs=64]":
        CaseCost(0.1475, 0.0356, 0.05233, 0.01569, 0.04416, 0.01556),
    "env_step[env=robots,num_envs=1024]":
        CaseCost(0.6173, 0.2015, 0.06028, 0.02059, 0.01224, 0.004186),
    "env_reset[env=robots,num_envs=1024]":
        CaseCost(0.8554, 0.1766, 0.07233, 0.01992, 0.07119, 0.0194),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64]":
        CaseCost(5.231, 0.0227, 0.01912, 0.0005105, 0.007972, 0.0001511),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=32]":
        CaseCost(5.697, 0.02384, 0.001374, 0.000396, 0.005988, 0.0002007),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16]":
        CaseCost(7.024, 0.02326, 0.01407, 0.0005575, 0.0054, 0.0001974),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=8]":
        CaseCost(6.113, 0.02426, 0.002947, 0.0003755, 0.0008301, 0.0001544),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64,inline=True]":
        CaseCost(5.97, 0.03104, 0.01083, 0.001282, 0.002182, 0.0004163),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64,inline=True,spin_us=300.0]":
        CaseCost(5.363, 0.03766, 0.007521, 0.001561, 0.006957, 0.0008126),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16,inline=True]":
        CaseCost(7.619, 0.03482, 0.009228, 0.0008001, 0.0007701, 0.0004264),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16,inline=True,spin_us=300.0]":
        CaseCost(6.568, 0.04314, 0.007223, 0.0009415, 0.0009502, 0.0003412),
    "buffer_store[num_envs=64]":
        CaseCost(0.02894, 0.002668, 0.0001322, 0.00013, 8.553e-06, 8.643e-06),
    "buffer_store[num_envs=1024]":
        CaseCost(0.03237, 0.009554, 0.01899, 0.004182, 1.08e-05, 1.076e-05),
    "minibatch_sampling[num_steps=32,num_envs=64]":
        CaseCost(0.01982, 0.003906, 0.01463, 0.0006709, 2.595e-05, 2.6e-05),
    "gae[num_steps=32,num_envs=64]":
        CaseCost(0.001115, 0.001098, 3.842e-05, 3.771e-05, 1.985e-05, 1.991e-05),
    "minibatch_sampling[num_steps=128,num_envs=1024]":
        CaseCost(0.628, 0.1502, 0.1084, 0.02622, 0.1275, 0.02311),
    "gae[num_steps=128,num_envs=1024]":
        CaseCost(0.04302, 0.006497, 0.0001241, 0.0001219, 9.804e-05, 9.846e-05),
    "ppo_loss_forward[batch=512]":
        CaseCost(1.012, 0.2141, 0.0008292, 0.0008268, 0.1205, 0.02385),
    "ppo_backward[batch=512]":
        CaseCost(0.4597, 0.1014, 0.001351, 0.001349, 0.0002901, 0.0002905),
    "ppo_loss_forward[batch=4096]":
        CaseCost(0.3476, 0.09761, 0.285, 0.07666, 0.00128, 0.001282),
    "ppo_backward[batch=4096]":
        CaseCost(1.71, 0.4775, 0.2638, 0.07377, 0.2837, 0.07004),
    "optimizer_step[hidden=64]":
        CaseCost(0.9703, 0.2829, 0.02939, 0.007039, 0.02649, 0.007517),
    "optimizer_step[hidden=256]":
        CaseCost(0.4917, 0.1345, 0.0005725, 0.0005669, 5.37e-05, 5.406e-05),
    "allreduce[kind=mlp]":
        CaseCost(4.456, 0.1747, 0.008063, 0.003639, 7.944e-05, 7.95e-05),
    "allreduce[kind=lstm]":
        CaseCost(4.974, 0.1158, 0.0007675, 0.0007648, 0.0001227, 0.0001229),
    "telemetry[part=sample]":
        CaseCost(0.05035, 0.005348, 0.0005933, 0.0005911, 0.0001396, 0.0001396),
    "telemetry[part=run]":
        CaseCost(0.0007472, 0.0007408, 0.07292, 0.005408, 0.001452, 0.000534),
    "policy_act[batch=64]":
        CaseCost(1.135, 0.2152, 0.1971, 0.03632, 0.1881, 0.03652),
    "policy_act[batch=1024]":
        CaseCost(1.667, 0.2984, 0.6232, 0.1232, 0.3161, 0.07857),
    "policy_act_kind[kind=mlp,num_envs=64]":
        CaseCost(0.8635, 0.1995, 0.1312, 0.03421, 0.1192, 0.03362),
    "update_epoch[num_envs=64,threads=1]":
        CaseCost(0.1636, 0.03835, 0.002568, 0.002566, 0.01028, 0.002224),
    "e2e_train[num_envs=64,env_steps=4096,threads=1]":
        CaseCost(0.07784, 0.01584, 0.1212, 0.02452, 0.0977, 0.01998),
    "policy_act_kind[kind=lstm,num_envs=64]":
        CaseCost(2.866, 0.7073, 0.03038, 0.007316, 0.032, 0.007944),
    "recurrent_evaluate[num_steps=32,num_envs=16,backward=False]":
        CaseCost(1.804, 0.4439, 0.1609, 0.03668, 0.1253, 0.02897),
    "recurrent_evaluate[num_steps=32,num_envs=16,backward=True]":
        CaseCost(2.977, 0.7289, 0.9373, 0.2329, 0.5466, 0.135),
    "lstm_recurrence[num_steps=32,num_envs=16,impl=compiled]":
        CaseCost(0.01461, 0.002618, 1.267, 0.3288, 0.09186, 0.02746),
    "lstm_recurrence[num_steps=32,num_envs=16,impl=torch]":
        CaseCost(0.01446, 0.002471, 1.565, 0.4294, 0.1187, 0.03441),
    "lstm_network[num_steps=32,num_envs=16,impl=compiled]":
        CaseCost(0.1507, 0.04316, 0.1363, 0.03487, 0.0009226, 0.0009235),
    "lstm_network[num_steps=32,num_envs=16,impl=autograd]":
        CaseCost(0.4849, 0.1296, 1.221, 0.3341, 0.4784, 0.1392),
    "update_epoch[num_envs=64,threads=1,kind=lstm]":
        CaseCost(0.05841, 0.01794, 0.04187, 0.01227, 0.02385, 0.007974),
    "e2e_train[num_envs=64,threads=1,kind=lstm,env_steps=4096]":
        CaseCost(0.04103, 0.01289, 0.2308, 0.07792, 0.2398, 0.07298),
    "e2e_train[num_envs=16,env_steps=512,threads=1,kind=lstm]":
        CaseCost(0.04973, 0.01341, 0.04295, 0.01643, 0.04494, 0.01292),
    "petri_step[turbo=True,num_envs=64]":
        CaseCost(0.04689, 0.0151, 8.43e-05, 8.176e-05, 5.518e-05, 5.523e-05),
    "petri_reset[turbo=True,num_envs=64]":
        CaseCost(0.01563, 0.003595, 5.762e-05, 5.618e-05, 3.575e-05, 3.584e-05),
    "petri_step[turbo=True,num_envs=1024]":
        CaseCost(0.229, 0.06515, 0.006359, 0.0004281, 0.0002649, 0.0002652),
    "petri_reset[turbo=True,num_envs=1024]":
        CaseCost(0.01709, 0.005072, 0.0001415, 0.0001403, 0.0001053, 0.0001056),
    "petri_step[turbo=False,num_envs=64]":
        CaseCost(0.03451, 0.01459, 0.001328, 0.001327, 0.005373, 0.001431),
    "petri_reset[turbo=False,num_envs=64]":
        CaseCost(0.01176, 0.003553, 6.147e-05, 5.969e-05, 3.951e-05, 3.955e-05),
    "petri_step[turbo=False,num_envs=1024]":
        CaseCost(0.2312, 0.06524, 0.07477, 0.02051, 0.07497, 0.02092),
    "petri_reset[turbo=False,num_envs=1024]":
        CaseCost(0.01283, 0.004812, 0.000148, 0.0001466, 0.0001055, 0.0001058),
    "petri_masked_act[num_envs=64]":
        CaseCost(0.24, 0.06619, 0.01301, 0.00307, 0.0002578, 0.0002586),
    "petri_e2e[num_envs=64,env_steps=4096,threads=1]":
        CaseCost(0.048, 0.01373, 0.4231, 0.1223, 0.3394, 0.1116),
    "petri_e2e[num_envs=96,env_steps=3072,threads=1]":
        CaseCost(0.02856, 0.01231, 0.2489, 0.07859, 0.2464, 0.07769),
    "robots_step[obs_mode=rgb_image,num_envs=1024]":
        CaseCost(0.7314, 0.2271, 0.194, 0.02219, 0.01806, 0.004441),
    "robots_reset[obs_mode=rgb_image,num_envs=1024]":
        CaseCost(0.5285, 0.1758, 0.06789, 0.02054, 0.06316, 0.01994),
    "robots_step[obs_mode=symbolic,num_envs=1024]":
        CaseCost(0.08742, 0.02938, 0.05455, 0.01621, 0.0002335, 0.000234),
    "robots_reset[obs_mode=symbolic,num_envs=1024]":
        CaseCost(0.08565, 0.03094, 0.06537, 0.01735, 0.04624, 0.016),
    "robots_render[num_envs=256]":
        CaseCost(0.3108, 0.07591, 0.0004697, 0.0004677, 0.0003148, 0.0003152),
    "robots_render_reference[num_envs=16]":
        CaseCost(0.1063, 0.02828, 0.08711, 0.02426, 0.02682, 0.006773),
    "policy_act_kind[kind=convlstm,num_envs=64]":
        CaseCost(1.819, 0.478, 0.9438, 0.2698, 0.6095, 0.1919),
    "recurrent_evaluate[num_steps=16,num_envs=16,backward=False,kind=convlstm]":
        CaseCost(0.8046, 0.2076, 6.797, 1.849, 3.455, 1.027),
    "recurrent_evaluate[num_steps=16,num_envs=16,backward=True,kind=convlstm]":
        CaseCost(2.372, 0.7747, 21.14, 5.441, 8.227, 3.383),
    "update_epoch[num_envs=16,threads=1,kind=convlstm]":
        CaseCost(0.4746, 0.3255, 1.231, 0.7838, 0.8013, 0.7196),
    "e2e_train[num_envs=16,threads=1,kind=convlstm,env_steps=1024]":
        CaseCost(0.05808, 0.05795, 7.597, 6.395, 7.502, 6.542),
    "e2e_train[num_envs=4,env_steps=16,threads=1,kind=convlstm,num_steps=4,num_minibatches=1]":
        CaseCost(0.05848, 0.05525, 0.1336, 0.1334, 0.1621, 0.1235),
    "grid_step[num_maps=256]":
        CaseCost(0.1248, 0.1052, 0.002985, 0.002984, 0.002536, 0.002526),
    "grid_reset[num_maps=256]":
        CaseCost(0.1521, 0.1079, 0.03863, 0.03853, 0.03492, 0.03491),
    "teacher_call[num_maps=256]":
        CaseCost(0.172, 0.1407, 0.000466, 0.000464, 0.0002281, 0.0002286),
    "grid_update_epoch[num_maps=16,threads=1,phase=supervised]":
        CaseCost(0.2518, 0.1495, 0.7982, 0.335, 0.6341, 0.2809),
    "grid_e2e[num_maps=16,threads=1,phase=supervised,env_steps=8192]":
        CaseCost(0.07317, 0.03392, 2.971, 1.285, 3.315, 1.268),
    "grid_update_epoch[num_maps=16,threads=1,phase=ppo]":
        CaseCost(0.4951, 0.1641, 0.8227, 0.3355, 0.7002, 0.2851),
    "grid_e2e[num_maps=16,threads=1,phase=ppo,env_steps=8192]":
        CaseCost(0.08717, 0.03673, 2.675, 1.25, 2.871, 1.22),
    "grid_e2e[num_maps=1,env_steps=256,threads=1,phase=supervised,num_steps=16]":
        CaseCost(0.06273, 0.02359, 0.1834, 0.07537, 0.1769, 0.06896),
    "physics_step[frames=256]":
        CaseCost(0.3646, 0.09601, 0.02035, 0.008301, 0.02007, 0.007992),
    "env_step[env=gym:HalfCheetah-v5,num_envs=1,backend=serial]":
        CaseCost(0.351, 0.09203, 0.000321, 0.0003182, 7.443e-05, 7.474e-05),
    "env_step[env=gym:HalfCheetah-v5,num_envs=2,backend=workers]":
        CaseCost(3.46, 0.1033, 0.001079, 0.0006203, 0.0002662, 0.0001306),
    "env_step[env=gym:HalfCheetah-v5,num_envs=1,backend=envpool]":
        CaseCost(2.235, 0.9264, 0.0003335, 0.0003809, 0.0001973, 0.0002376),
    "env_step[env=gym:HalfCheetah-v5,num_envs=8,backend=batch]":
        CaseCost(0.5737, 0.1398, 0.015, 0.002819, 0.002287, 0.002518),
    "policy_act_gaussian[num_envs=1,impl=fused]":
        CaseCost(0.1369, 0.0996, 3.125e-05, 2.874e-05, 3.565e-06, 3.596e-06),
    "policy_act_gaussian[num_envs=1,impl=torch]":
        CaseCost(0.1322, 0.09551, 0.0007729, 0.0007712, 9.455e-05, 9.515e-05),
    "update_epoch[env=gym:HalfCheetah-v5]":
        CaseCost(0.3087, 0.265, 0.003019, 0.003017, 0.00264, 0.002612),
    "e2e_train[env_steps=256,num_steps=256]":
        CaseCost(0.1304, 0.09317, 0.02765, 0.02765, 0.02452, 0.02453),
    "atari_step[backend=gymnasium,num_envs=8]":
        CaseCost(1.67, 1.764, 0.004466, 0.004465, 0.004052, 0.004052),
    "atari_step[backend=envpool,num_envs=8]":
        CaseCost(1.107, 1.473, 0.002646, 0.004091, 0.001815, 0.003555),
    "nature_cnn_act[num_envs=8,threads=1]":
        CaseCost(0.1057, 0.1651, 0.005837, 0.009814, 0.002263, 0.002264),
    "nature_cnn_evaluate[batch=256,backward=False,threads=2]":
        CaseCost(0.09387, 0.1566, 0.05263, 0.1018, 0.05052, 0.1024),
    "nature_cnn_evaluate[batch=256,backward=True,threads=2]":
        CaseCost(0.09237, 0.1558, 0.121, 0.2383, 0.1076, 0.21),
    "atari_update_epoch[num_envs=8,num_steps=32,threads=2]":
        CaseCost(3.095, 3.051, 0.1871, 0.1867, 0.1714, 0.17),
    "atari_e2e[backend=envpool,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(1.073, 1.226, 0.06315, 0.06436, 0.05297, 0.055),
    "atari_e2e[backend=envpool,env_batch_size=2,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(1.221, 1.239, 0.07682, 0.07675, 0.08117, 0.07039),
    "atari_e2e[backend=gymnasium,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(1.068, 1.023, 0.07006, 0.06828, 0.06192, 0.05735),
    "policy_act_kind[kind=cnn,num_envs=64]":
        CaseCost(0.4091, 0.4033, 0.1438, 0.1435, 0.1278, 0.1277),
    "update_epoch[num_envs=64,threads=1,kind=cnn]":
        CaseCost(0.204, 0.2005, 0.477, 0.4747, 0.5483, 0.4418),
    "e2e_train[num_envs=64,threads=1,kind=cnn,env_steps=4096]":
        CaseCost(0.05926, 0.04252, 7.883, 4.009, 7.123, 4.011),
}
# Skipped where the costs were measured (planned at no cost): why.
SKIPPED: dict[str, str] = {
    "transfer[direction=d2h,memory=pageable,non_blocking=False,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=d2h,memory=pageable,non_blocking=True,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=d2h,memory=pinned,non_blocking=False,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=d2h,memory=pinned,non_blocking=True,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=h2d,memory=pageable,non_blocking=False,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=h2d,memory=pageable,non_blocking=True,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=h2d,memory=pinned,non_blocking=False,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
    "transfer[direction=h2d,memory=pinned,non_blocking=True,batch=1024]":
        "CUDA not available (torch 2.13.0+cpu): nothing to transfer",
}
# fmt: on
