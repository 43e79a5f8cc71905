# From the blog post ddpgen started from (../shared/reference): launch
# Kept as written, defects included: tests/test_lint.py lints it.
import os
import argparse
import torch
import torch.distributed as dist
import torchvision
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)
    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))
def setup(rank, world_size):
    # 注：设置默认使用的GPU设备，当遇到CUDA error: an illegal memory access was encountered
    #     请检查这块是否有设置
    torch.cuda.set_device(rank)
    os.environ['MASTER_ADDR'] = 'localhost'
    os.environ['MASTER_PORT'] = '12355'
    # 注：第一个参数选择后端，nccl后端是单机多卡情况下的推荐，比gloo快很多。
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
def cleanup():
    dist.destroy_process_group()
def demo_basic(rank):
    print(f"Running basic DDP example on rank {rank}.")
    trainset = torchvision.datasets.CIFAR10(...)
    # 注：数据需要用torch.utils.data.distributed.DistributedSampler处理
    train_sampler = torch.utils.data.distributed.DistributedSampler(trainset)
    trainloader = torch.utils.data.DataLoader(trainset,
                                              batch_size=bs,
                                              num_workers=2,
                                              sampler=train_sampler,
                                              )
    # 注：需要先加载到rank上，再用DDP处理
    model = ToyModel().to(rank)
    ddp_model = DDP(model, device_ids=[rank], output_device=rank)
    loss_fn = nn.MSELoss()
    # 注：需要在使用DDP处理完之后，再构建optimizerr
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    for data in trainloader:
        inputs, labels = data.input.to(rank), data.lable.to(rank)
        outputs = ddp_model(inputs)
        loss_fn(outputs, labels).backward()
        optimizer.step()
    if rank == 0:
        # 注1：只需再rank==0时进行模型保存
        # 注2：保存的是ddp_model.module.state_dict，这才是真正的模型参数。ddp_model只是一个包裹函数
        torch.save(ddp_model.module.state_dict(), "xxx.ckpt")
if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    # 注：这里必须要定义一个传参“locak_rank”, launch模块会自动传递这个参数，我们无需传递，未定义会报错。
    parser.add_argument("--locak_rank", default=0, type=int)
    opts = parser.parse_args()
    n_gpus = torch.cuda.device_count()
    assert n_gpus >= 2, f"Requires at least 2 GPUs to run, but got {n_gpus}"
    world_size = n_gpus
    setup(opts.local_rank, world_size)
    demo_basic(opts.local_rank)
    cleanup()
####
