"""A language model's training rates: tokens per second, achieved TFLOP/s
and model FLOPs utilisation (MFU), from the samples (windows) per second."""

import torch

# Dense bf16 peaks (TFLOP/s) of common GPUs, matched in the device's name.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0}


def peak_tflops(device, configured):
    """--peak-tflops, or the table's figure for this GPU; None if unknown."""
    if configured or device.type != "cuda":
        return configured or None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


class LanguageModelSpeed:
    """Tokens per second, achieved TFLOP/s and model FLOPs utilisation (MFU)
    from the training samples (windows) per second."""

    def __init__(self, tokens_per_sample, flops_per_token, peak):
        self.tokens_per_sample = tokens_per_sample
        self.flops_per_token = flops_per_token
        self.peak = peak  # all processes together: peak x world size

    def rates(self, samples_per_second):
        tokens = samples_per_second * self.tokens_per_sample
        tflops = tokens * self.flops_per_token / 1e12
        rates = {"tokens_per_second": tokens, "tflops": tflops}
        if self.peak:
            rates["mfu"] = tflops / self.peak
        return rates
