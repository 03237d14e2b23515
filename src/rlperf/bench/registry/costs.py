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


MEASURED = "2026-11-29 01:16 UTC, load average 5.7 at the end, commit 1da1f30"
# fmt: off
COSTS: dict[str, CaseCost] = {
    "env_step[env=cartpole,num_envs=4]":
        CaseCost(0.006802, 0.002806, 0.001974, 0.001973, 2.848e-05, 2.858e-05),
    "env_step[env=cartpole,num_envs=64]":
        CaseCost(0.007029, 0.003054, 0.002018, 0.002017, 3.148e-05, 3.155e-05),
    "env_reset[env=cartpole,num_envs=64]":
        CaseCost(0.006594, 0.002616, 0.00186, 0.001859, 2.68e-05, 2.687e-05),
    "env_step[env=cartpole,num_envs=1024]":
        CaseCost(0.00952, 0.005546, 0.006225, 0.002239, 6.184e-05, 6.191e-05),
    "env_reset[env=cartpole,num_envs=1024]":
        CaseCost(0.002694, 0.002693, 0.006009, 0.002012, 4.124e-05, 4.133e-05),
    "env_step[env=catch,num_envs=4]":
        CaseCost(0.006969, 0.002991, 0.001922, 0.001921, 2.151e-05, 2.154e-05),
    "env_step[env=catch,num_envs=64]":
        CaseCost(0.007168, 0.003185, 0.001919, 0.001918, 2.267e-05, 2.278e-05),
    "env_reset[env=catch,num_envs=64]":
        CaseCost(0.006857, 0.002874, 0.005958, 0.001961, 4.551e-05, 4.568e-05),
    "env_step[env=catch,num_envs=1024]":
        CaseCost(0.01048, 0.006495, 0.00616, 0.002152, 3.91e-05, 3.918e-05),
    "env_reset[env=catch,num_envs=1024]":
        CaseCost(0.003438, 0.003437, 0.005988, 0.002012, 5.99e-05, 6.012e-05),
    "env_step[env=grid,num_envs=4]":
        CaseCost(0.02844, 0.008516, 0.0104, 0.002355, 0.0001692, 0.0001697),
    "env_step[env=grid,num_envs=64]":
        CaseCost(0.1036, 0.04352, 0.002808, 0.002807, 0.0007001, 0.0007013),
    "env_reset[env=grid,num_envs=64]":
        CaseCost(0.07237, 0.03241, 0.0223, 0.01028, 0.01612, 0.007997),
    "env_step[env=grid,num_envs=1024]":
        CaseCost(1.533, 0.7545, 0.03042, 0.01457, 0.02258, 0.01195),
    "env_reset[env=grid,num_envs=1024]":
        CaseCost(0.8346, 0.4168, 0.3512, 0.1744, 0.2795, 0.1384),
    "env_step[env=petri,num_envs=4]":
        CaseCost(0.007616, 0.003632, 0.001921, 0.001921, 4.482e-05, 4.49e-05),
    "env_step[env=petri,num_envs=64]":
        CaseCost(0.003815, 0.003814, 0.00601, 0.002033, 5.725e-05, 5.737e-05),
    "env_reset[env=petri,num_envs=64]":
        CaseCost(0.006584, 0.003557, 0.008816, 0.001986, 3.78e-05, 3.787e-05),
    "env_step[env=petri,num_envs=1024]":
        CaseCost(0.01037, 0.007727, 0.002742, 0.002355, 0.0002209, 0.0002212),
    "env_reset[env=petri,num_envs=1024]":
        CaseCost(0.02393, 0.005173, 0.007296, 0.002124, 0.0001139, 0.0001143),
    "env_step[env=robots,num_envs=4]":
        CaseCost(0.08038, 0.03882, 0.002033, 0.002031, 9.001e-05, 9.027e-05),
    "env_step[env=robots,num_envs=64]":
        CaseCost(0.09591, 0.04807, 0.002738, 0.002736, 0.0002241, 0.0002245),
    "env_reset[env=robots,num_envs=64]":
        CaseCost(0.06674, 0.03359, 0.03429, 0.01714, 0.03151, 0.01523),
    "env_step[env=robots,num_envs=1024]":
        CaseCost(0.4087, 0.2036, 0.04566, 0.02215, 0.005862, 0.002103),
    "env_reset[env=robots,num_envs=1024]":
        CaseCost(0.3553, 0.1762, 0.04468, 0.02129, 0.03875, 0.01948),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64]":
        CaseCost(2.956, 1.464, 0.01917, 0.002313, 0.007192, 0.001834),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=32]":
        CaseCost(4.201, 1.505, 0.01785, 0.002228, 0.004485, 0.001816),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16]":
        CaseCost(4.299, 1.546, 0.02628, 0.00243, 0.01167, 0.001979),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=8]":
        CaseCost(4.304, 1.467, 0.03032, 0.002266, 0.002396, 0.001946),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64,inline=True]":
        CaseCost(4.108, 1.475, 0.03234, 0.003336, 0.006373, 0.002449),
    "env_step_workers[env=gym:CartPole-v1,num_envs=64,workers=2,batch=64,inline=True,spin_us=300.0]":
        CaseCost(4.73, 1.428, 0.04814, 0.003654, 0.02449, 0.003114),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16,inline=True]":
        CaseCost(5.932, 1.518, 0.04361, 0.01291, 0.01417, 0.002735),
    "env_step_workers[env=grid,num_envs=16,workers=2,batch=16,inline=True,spin_us=300.0]":
        CaseCost(5.445, 1.468, 0.01932, 0.002818, 0.0106, 0.003065),
    "buffer_store[num_envs=64]":
        CaseCost(0.002649, 0.002647, 0.0258, 0.002454, 8.763e-06, 8.743e-06),
    "buffer_store[num_envs=1024]":
        CaseCost(0.03432, 0.01035, 0.02597, 0.006306, 9.424e-06, 9.464e-06),
    "minibatch_sampling[num_steps=32,num_envs=64]":
        CaseCost(0.02801, 0.004031, 0.01641, 0.003257, 3.061e-05, 3.062e-05),
    "gae[num_steps=32,num_envs=64]":
        CaseCost(0.001091, 0.001088, 0.006988, 0.00209, 2.17e-05, 2.174e-05),
    "minibatch_sampling[num_steps=128,num_envs=1024]":
        CaseCost(0.4035, 0.1218, 0.08448, 0.02664, 0.07196, 0.02395),
    "gae[num_steps=128,num_envs=1024]":
        CaseCost(0.02211, 0.006479, 0.01878, 0.002258, 0.0001222, 0.0001226),
    "ppo_loss_forward[batch=512]":
        CaseCost(0.829, 0.2776, 0.1715, 0.06698, 0.0002676, 0.000268),
    "ppo_backward[batch=512]":
        CaseCost(0.294, 0.1571, 0.01566, 0.009473, 0.0002695, 0.0002699),
    "ppo_loss_forward[batch=4096]":
        CaseCost(0.3986, 0.1935, 0.1728, 0.08363, 0.1671, 0.07984),
    "ppo_backward[batch=4096]":
        CaseCost(0.1351, 0.07897, 0.03206, 0.01612, 0.01602, 0.009045),
    "optimizer_step[hidden=64]":
        CaseCost(0.4133, 0.2254, 0.01075, 0.006767, 2.269e-05, 2.276e-05),
    "optimizer_step[hidden=256]":
        CaseCost(0.2053, 0.1252, 0.02089, 0.01312, 6.788e-05, 6.826e-05),
    "allreduce[kind=mlp]":
        CaseCost(1.49, 1.156, 0.009544, 0.01154, 0.006329, 0.001728),
    "allreduce[kind=lstm]":
        CaseCost(2.108, 1.183, 0.01107, 0.001774, 0.003929, 0.0015),
    "telemetry[part=sample]":
        CaseCost(0.01527, 0.004466, 0.002345, 0.002186, 0.000242, 0.000203),
    "telemetry[part=run]":
        CaseCost(0.0004178, 0.0004163, 0.02663, 0.00622, 0.003299, 0.0005068),
    "policy_act[batch=64]":
        CaseCost(0.3356, 0.1311, 0.09039, 0.03901, 0.04403, 0.03246),
    "policy_act[batch=1024]":
        CaseCost(0.01002, 0.01236, 0.04331, 0.03539, 0.07237, 0.02834),
    "policy_act_kind[kind=mlp,num_envs=64]":
        CaseCost(0.117, 0.04043, 0.01974, 0.008704, 0.0001749, 0.0001755),
    "update_epoch[num_envs=64,threads=1]":
        CaseCost(0.04649, 0.01495, 0.01072, 0.004157, 0.006056, 0.002056),
    "e2e_train[num_envs=64,env_steps=4096,threads=1]":
        CaseCost(0.03413, 0.013, 0.07671, 0.02297, 0.06028, 0.01927),
    "policy_act_kind[kind=lstm,num_envs=64]":
        CaseCost(0.06056, 0.03243, 0.01741, 0.01242, 0.01197, 0.007971),
    "recurrent_evaluate[num_steps=32,num_envs=16,backward=False]":
        CaseCost(0.0878, 0.05314, 0.05668, 0.03398, 0.001684, 0.001685),
    "recurrent_evaluate[num_steps=32,num_envs=16,backward=True]":
        CaseCost(0.02975, 0.01738, 0.1908, 0.1152, 0.03733, 0.02532),
    "lstm_recurrence[num_steps=32,num_envs=16,impl=compiled]":
        CaseCost(0.007853, 0.002483, 0.5543, 0.381, 0.03992, 0.03007),
    "lstm_recurrence[num_steps=32,num_envs=16,impl=torch]":
        CaseCost(0.00239, 0.002389, 0.6903, 0.4384, 0.2708, 0.2277),
    "lstm_network[num_steps=32,num_envs=16,impl=compiled]":
        CaseCost(0.09789, 0.07876, 0.02578, 0.0232, 0.005327, 0.00521),
    "lstm_network[num_steps=32,num_envs=16,impl=autograd]":
        CaseCost(0.03255, 0.0274, 0.3833, 0.3712, 0.009749, 0.01193),
    "update_epoch[num_envs=64,threads=1,kind=lstm]":
        CaseCost(0.01747, 0.0174, 0.01106, 0.01104, 0.007126, 0.007084),
    "e2e_train[num_envs=64,threads=1,kind=lstm,env_steps=4096]":
        CaseCost(0.01704, 0.01321, 0.09282, 0.07195, 0.1024, 0.06906),
    "e2e_train[num_envs=16,env_steps=512,threads=1,kind=lstm]":
        CaseCost(0.03143, 0.01386, 0.02073, 0.01664, 0.01414, 0.01173),
    "petri_step[turbo=True,num_envs=64]":
        CaseCost(0.01726, 0.01418, 0.001842, 0.001841, 6.184e-05, 6.2e-05),
    "petri_reset[turbo=True,num_envs=64]":
        CaseCost(0.004378, 0.003478, 0.001892, 0.001825, 4.136e-05, 4.151e-05),
    "petri_step[turbo=True,num_envs=1024]":
        CaseCost(0.07705, 0.06214, 0.003395, 0.002344, 0.0002989, 0.0002999),
    "petri_reset[turbo=True,num_envs=1024]":
        CaseCost(0.005982, 0.004764, 0.001859, 0.001858, 0.0001021, 0.0001024),
    "petri_step[turbo=False,num_envs=64]":
        CaseCost(0.03063, 0.01463, 0.00739, 0.003389, 0.001372, 0.001372),
    "petri_reset[turbo=False,num_envs=64]":
        CaseCost(0.007384, 0.003383, 0.001804, 0.001803, 4.031e-05, 4.04e-05),
    "petri_step[turbo=False,num_envs=1024]":
        CaseCost(0.1331, 0.0636, 0.04215, 0.02256, 0.03868, 0.02136),
    "petri_reset[turbo=False,num_envs=1024]":
        CaseCost(0.004543, 0.004542, 0.001905, 0.001905, 0.000106, 0.0001063),
    "petri_masked_act[num_envs=64]":
        CaseCost(0.02403, 0.01597, 0.01917, 0.01596, 0.000282, 0.0002826),
    "petri_e2e[num_envs=64,env_steps=4096,threads=1]":
        CaseCost(0.0162, 0.01382, 0.136, 0.1107, 0.1297, 0.1047),
    "petri_e2e[num_envs=96,env_steps=3072,threads=1]":
        CaseCost(0.01662, 0.01441, 0.09107, 0.07548, 0.08569, 0.06617),
    "robots_step[obs_mode=rgb_image,num_envs=1024]":
        CaseCost(0.3331, 0.2666, 0.04278, 0.02283, 0.002528, 0.002532),
    "robots_reset[obs_mode=rgb_image,num_envs=1024]":
        CaseCost(0.5207, 0.3511, 0.0382, 0.02132, 0.03849, 0.01856),
    "robots_step[obs_mode=symbolic,num_envs=1024]":
        CaseCost(0.06997, 0.02999, 0.04091, 0.02022, 0.0001892, 0.0001897),
    "robots_reset[obs_mode=symbolic,num_envs=1024]":
        CaseCost(0.06837, 0.0299, 0.03498, 0.01896, 0.01525, 0.0152),
    "robots_render[num_envs=256]":
        CaseCost(0.07439, 0.07408, 0.002239, 0.002224, 0.0002841, 0.0002844),
    "robots_render_reference[num_envs=16]":
        CaseCost(0.03427, 0.0281, 0.05726, 0.02843, 0.01463, 0.006704),
    "policy_act_kind[kind=convlstm,num_envs=64]":
        CaseCost(0.4909, 0.351, 0.3356, 0.346, 0.3702, 0.2644),
    "recurrent_evaluate[num_steps=16,num_envs=16,backward=False,kind=convlstm]":
        CaseCost(0.1924, 0.1084, 0.8529, 0.5892, 0.439, 0.2882),
    "recurrent_evaluate[num_steps=16,num_envs=16,backward=True,kind=convlstm]":
        CaseCost(0.104, 0.1106, 1.851, 1.423, 2.938, 1.953),
    "update_epoch[num_envs=16,threads=1,kind=convlstm]":
        CaseCost(0.4339, 0.32, 0.8845, 0.7681, 1.003, 0.7359),
    "e2e_train[num_envs=16,threads=1,kind=convlstm,env_steps=1024]":
        CaseCost(0.1353, 0.06265, 9.938, 6.491, 13.18, 6.575),
    "e2e_train[num_envs=4,env_steps=16,threads=1,kind=convlstm,num_steps=4,num_minibatches=1]":
        CaseCost(0.1076, 0.05442, 0.2512, 0.1312, 0.2366, 0.1183),
    "grid_step[num_maps=256]":
        CaseCost(0.2129, 0.1046, 0.008806, 0.004811, 0.006187, 0.002283),
    "grid_reset[num_maps=256]":
        CaseCost(0.2086, 0.1029, 0.08245, 0.0403, 0.06899, 0.03502),
    "teacher_call[num_maps=256]":
        CaseCost(0.2739, 0.1366, 0.002355, 0.002354, 0.0001857, 0.0001863),
    "grid_update_epoch[num_maps=16,threads=1,phase=supervised]":
        CaseCost(0.2801, 0.1397, 0.6528, 0.3231, 0.533, 0.2642),
    "grid_e2e[num_maps=16,threads=1,phase=supervised,env_steps=8192]":
        CaseCost(0.06519, 0.03287, 2.453, 1.215, 2.148, 1.179),
    "grid_update_epoch[num_maps=16,threads=1,phase=ppo]":
        CaseCost(0.1475, 0.1425, 0.4659, 0.3241, 0.451, 0.2716),
    "grid_e2e[num_maps=16,threads=1,phase=ppo,env_steps=8192]":
        CaseCost(0.07874, 0.03521, 2.495, 1.247, 2.428, 1.197),
    "grid_e2e[num_maps=1,env_steps=256,threads=1,phase=supervised,num_steps=16]":
        CaseCost(0.05148, 0.02536, 0.1661, 0.0846, 0.1434, 0.07239),
    "physics_step[frames=256]":
        CaseCost(0.2705, 0.09184, 0.01791, 0.009907, 0.01593, 0.007927),
    "env_step[env=gym:HalfCheetah-v5,num_envs=1,backend=serial]":
        CaseCost(0.2643, 0.09399, 0.002139, 0.002138, 8.342e-05, 8.362e-05),
    "env_step[env=gym:HalfCheetah-v5,num_envs=2,backend=workers]":
        CaseCost(3.676, 1.684, 0.01301, 0.002109, 0.003538, 0.001797),
    "env_step[env=gym:HalfCheetah-v5,num_envs=1,backend=envpool]":
        CaseCost(2.913, 0.921, 0.002237, 0.002236, 0.0001456, 0.0001461),
    "env_step[env=gym:HalfCheetah-v5,num_envs=8,backend=batch]":
        CaseCost(0.2923, 0.1081, 0.003801, 0.002377, 0.0003463, 0.0003466),
    "policy_act_gaussian[num_envs=1,impl=fused]":
        CaseCost(0.2749, 0.1056, 0.001989, 0.001934, 3.856e-06, 3.866e-06),
    "policy_act_gaussian[num_envs=1,impl=torch]":
        CaseCost(0.2797, 0.1009, 0.006634, 0.00263, 0.0001124, 0.000113),
    "update_epoch[env=gym:HalfCheetah-v5]":
        CaseCost(0.6421, 0.2761, 0.007027, 0.004945, 0.006739, 0.002734),
    "e2e_train[env_steps=256,num_steps=256]":
        CaseCost(0.2906, 0.09949, 0.05225, 0.02934, 0.04911, 0.0251),
    "atari_step[backend=gymnasium,num_envs=8]":
        CaseCost(3.405, 1.68, 0.01433, 0.00635, 0.008095, 0.004144),
    "atari_step[backend=envpool,num_envs=8]":
        CaseCost(3.034, 1.5, 0.01375, 0.005728, 0.007034, 0.003581),
    "nature_cnn_act[num_envs=8,threads=1]":
        CaseCost(1.522, 0.7591, 0.02869, 0.01457, 0.002562, 0.002391),
    "nature_cnn_evaluate[batch=256,backward=False,threads=2]":
        CaseCost(2.314, 1.144, 0.4378, 0.2182, 0.4315, 0.215),
    "nature_cnn_evaluate[batch=256,backward=True,threads=2]":
        CaseCost(2.274, 1.124, 1.095, 0.5436, 1.059, 0.5356),
    "atari_update_epoch[num_envs=8,num_steps=32,threads=2]":
        CaseCost(6.236, 3.091, 0.3707, 0.1847, 0.3401, 0.1683),
    "atari_e2e[backend=envpool,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(2.594, 1.289, 0.1531, 0.07315, 0.1288, 0.06104),
    "atari_e2e[backend=envpool,env_batch_size=2,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(2.571, 1.273, 0.1577, 0.07949, 0.1392, 0.06931),
    "atari_e2e[backend=gymnasium,num_envs=4,num_steps=8,env_steps=32,threads=1,num_minibatches=1,update_epochs=1]":
        CaseCost(2.058, 1.045, 0.1406, 0.07331, 0.112, 0.06188),
    "policy_act_kind[kind=cnn,num_envs=64]":
        CaseCost(0.6578, 0.3331, 0.2653, 0.1321, 0.267, 0.1304),
    "update_epoch[num_envs=64,threads=1,kind=cnn]":
        CaseCost(0.4273, 0.2127, 0.9714, 0.4835, 0.9092, 0.4589),
    "e2e_train[num_envs=64,threads=1,kind=cnn,env_steps=4096]":
        CaseCost(0.08814, 0.04543, 9.283, 4.015, 8.155, 4.072),
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
