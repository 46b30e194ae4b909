"""distval: does distributed training work in this PyTorch image?"""

__version__ = "0.1.0"
