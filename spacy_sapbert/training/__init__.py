"""Self-alignment pretraining (SapBERT) and fine-tuning: pairs, miner, losses, trainer.

Heavy imports (torch, transformers) happen inside the modules that need them; importing this
package is cheap enough for the CLI. It needs the [train] extra: without torch or transformers,
importing it raises :class:`~spacy_sapbert.errors.MissingExtraError` (E820) naming the extra.
"""
from ..base.extras import require

require("Training (spacy_sapbert.training: pretrain, finetune, train-context, train-reranker)", "torch", "transformers")

from .config import TrainConfig, load_config
from .losses import InfoNCELoss, MultiSimilarityLoss, TripletMarginLoss, make_loss
from .miners import PairMasks, TripletMarginMiner
from .pairs import PairSet, write_kb_pairs, write_task_pairs
from .run import dev_set, finetune, pretrain
from .trainer import DevSet, Trainer, TrainResult, train

__all__ = [
    "TrainConfig",
    "load_config",
    "MultiSimilarityLoss",
    "InfoNCELoss",
    "TripletMarginLoss",
    "make_loss",
    "TripletMarginMiner",
    "PairMasks",
    "PairSet",
    "write_kb_pairs",
    "write_task_pairs",
    "pretrain",
    "finetune",
    "dev_set",
    "DevSet",
    "Trainer",
    "TrainResult",
    "train",
]
