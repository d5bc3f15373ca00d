"""What a spec field is called on a page, and one line that says what it does: a lesson's open control, its notes.

One table for every kind's fields (nested adapter fields dotted: ``adapter.init``), with the entries whose
meaning depends on the kind (``epochs`` trains a model in ``zoo``, an adapter in ``stitch``) given per kind.
A field the table does not know reads as its name in words (``split_seed`` -> "Split seed"), with no help.

>>> field_words("stitch", "epochs").label, field_words("zoo", "epochs").label
('Adapter training epochs', 'Training epochs')
>>> field_words("stitch", "adapter.init").label
'Adapter start'
>>> field_words("stitch", "no_such_field")
FieldWords(label='No such field', help='')
"""

from __future__ import annotations

from dataclasses import dataclass

from stitchcore.measures.traits import METRIC_HELP

__all__ = ["FieldWords", "field_words", "known_fields"]


@dataclass(frozen=True)
class FieldWords:
    """A spec field for people: a widget's label and the one line under it."""

    label: str  # "Adapter training epochs"
    help: str  # what it does, in one line ("" = nothing to add)


_W = FieldWords
_ADAPTER_EPOCHS = _W("Adapter training epochs", "passes over the training images; 0 keeps the adapter's start "
                     "(a least-squares fit stays untrained)")  # fmt: skip
_CAPS = {
    "max_train": _W("Training images (cap)", "at most this many training images; 0 or empty: all of them"),
    "max_test": _W("Test images (cap)", "at most this many test images; 0 or empty: all of them"),
}
_LM_HEADS = "a: preserve A's head (A's wte, wpe and ln_f; the head is tied to wte) · b: B's ln_f and lm_head"
_LM_HEAD = "whose final layer norm and head turn the stream into next-token odds. " + _LM_HEADS

# Fields that mean the same in every kind that has them.
_COMMON: dict[str, FieldWords] = {
    "a": _W("Model A", "the model whose bottom layers (or rows) are used"),
    "b": _W("Model B", "the model whose top layers and head (or columns) are used"),
    "cut_a": _W("Cut in A", "where A is cut: its layers up to here feed the adapter"),
    "cut_b": _W("Cut in B", "where B takes over: its layers after here finish the job"),
    "senders": _W("Cuts in A (rows)", "A's cuts compared, in order; empty: every cut"),
    "receivers": _W("Cuts in B (columns)", "B's cuts compared, in order; empty: every cut"),
    "dataset": _W("Dataset", "the images it is scored on; empty: the dataset B was trained on"),
    "optimizer": _W("Optimizer", "adamw (cosine schedule to 0) or sgd (momentum 0.9)"),
    "lr": _W("Learning rate", "the optimizer's step size: too large diverges, too small barely moves"),
    "weight_decay": _W("Weight decay", "pulls the trained weights towards 0 at every step"),
    "epochs": _ADAPTER_EPOCHS,
    "batch_size": _W("Batch size", "examples per optimizer step"),
    "seed": _W("Seed", "the adapter's random start and the order of the training images"),
    "objective": _W("Objective", "what the adapter learns: task (B's labels through B's top), match (B's own "
                    "activation at the cut), kd (B's outputs), final (B's own final features, its head's input: "
                    "the foundation-model paper's final feature matching, no labels), or a sum such as "
                    "task+0.5*match"),
    "kd_temperature": _W("Distillation temperature", "softens B's outputs for the kd objective"),
    "precision": _W("Precision", "fp32, or bf16 autocast (fast on GPUs, slow on most CPUs)"),
    "noise_control": _W("Noise-sender control", "also the same adapter trained from class-clustered noise of A's "
                        "cut shape and scale: a stitch no better than it says nothing about A's layers"),
    "twin_seeds": _W("Control twins' seeds", "distinct: A's and B's untrained twins from different seeds; "
                     "shared: one seed for both"),
    "seeds": _W("Adapter seeds", "adapters trained from this many seeds; the result adds their mean and spread"),
    "data_id": _W("The files' identity", "an image folder's path and a fingerprint of its files, measured when the "
                  "run is made: other files give another run"),
    **_CAPS,
    # the adapter (stitching.AdapterSpec), as a lesson opens it
    "adapter.kind": _W("Adapter", "the layer that joins the two cuts: linear, lowrank, mlp ..."),
    "adapter.norm": _W("BatchNorm", "where the adapter normalises: none, bn_before, bn_after or both"),
    "adapter.resample": _W("Resample", "how A's map is resized to B's grid: bilinear, nearest, strided or none; "
                           "no_downsample (where offered) hands B A's larger grid, for a B whose rest pools it (a "
                           "ResNet)"),
    "adapter.init": _W("Adapter start", "lstsq: a least-squares fit of B's own activations; random; identity; "
                       "procrustes: the best rotation"),
    "adapter.rank": _W("Low-rank width", "the lowrank adapter's inner width; 0 or empty: a quarter of the channels"),
    "adapter.cls_token": _W("Class token", "a token receiver's class token: learned by the adapter, or B's own"),
    "adapter.rescale": _W("Grid rescaling", "a grid change of more than 2x: oneshot (one resize) or chained "
                          "(one step per 2x)"),
}  # fmt: skip

# A language stitch's alignment across tokenizers (lmstitch, lmdepth: stitchcore.lm.cross)
_ALIGNMENT = _W("Token alignment", "when A and B tokenize differently: each of B's tokens reads A's last token inside "
                "its bytes (last) or the mean of A's tokens inside them (mean)")

# Fields of one kind, or meaning something else there.
_BY_KIND: dict[str, dict[str, FieldWords]] = {
    "zoo": {
        "arch": _W("Architecture", "the network trained: cnn, mlp, resnet, vit, gpt ..."),
        "dataset": _W("Dataset", "the training and test data"),
        "seed": _W("Random seed", "the starting weights and the order of the training images: another seed "
                   "trains another network of the same recipe"),
        "epochs": _W("Training epochs", "passes over the training images (a vit or swin: 40 unless given; a "
                                         "char-GPT: 50 steps of text windows each)"),
        "optimizer": _W("Optimizer", "sgd (momentum 0.9) or adamw (cosine schedule to 0); a vit, swin or gpt: "
                        "adamw unless given"),
        "lr": _W("Learning rate", "the optimizer's step size; empty: 0.05 for sgd, 2e-3 for adamw"),
        "momentum": _W("Momentum", "sgd only: how much of the last step carries into the next"),
        "weight_decay": _W("Weight decay", "pulls the weights towards 0; empty: 5e-4 for sgd, 0.05 for adamw"),
        "image_size": _W("Image size", "inputs resized to this many pixels a side; empty: their own size"),
        "arch_kwargs": _W("Architecture settings", "the network's widths and depths, e.g. {\"width\": 32}"),
        "tokenizer": _W("Tokenizer", "a language model's tokens: char (one a character) or bpe:N (a byte-level BPE "
                        "of N tokens learned on the corpus's training text, e.g. bpe:512)"),
        "relabel": _W("Relabelled class (trait)", "train with every image of class X labelled Y (X:Y on a command line)"),
        "drop_class": _W("Dropped class (trait)", "a class never seen in training"),
        "l1": _W("L1 penalty", "pushes weights to exactly 0 (simple models, with pruning)"),
        "l2": _W("L2 penalty", "an explicit penalty on the weights' squares, beyond weight decay"),
        "prune_every": _W("Prune every (epochs)", "epochs between pruning the smallest weights; 0: never"),
        "prune_fraction": _W("Pruned share", "the share of the remaining weights pruned each time"),
        "finetune_layer": _W("Fine-tuned layer", "after training, only this layer is trained further"),
        "finetune_epochs": _W("Fine-tuning epochs", "epochs of training the fine-tuned layer alone"),
        "finetune_data": _W("Fine-tuning data", "what the fine-tuned layer learns from, e.g. digits|relabel3to8"),
        "finetune_lr": _W("Fine-tuning learning rate", "empty: the recipe's learning rate"),
        "start": _W("Start from", "a trained model whose weights it starts from; empty: random weights"),
        "keep_epochs": _W("Kept checkpoints", "the epochs whose weights are kept too (0: the starting weights; "
                            "0,5,10 on a command line)"),
        "data_id": _W("The files' identity", "an image folder's or text file's path and a fingerprint of its files, "
                      "measured when the recipe is made: other files give another model"),
        "augment": _W("Augmentation", "none, crop-flip or resized-crop-flip (a flipped digit is another digit)"),
    },
    "stitch": {
        "head": _W("Whose head", "b: B's top layers and head finish; a: B's middle, then A's head"),
        "head_cut": _W("Where A's head takes over", "head a only: the cut where B's middle hands back to A"),
        "val_fraction": _W("Validation fraction", "the share of training images held out to watch each epoch; "
                           "0: none"),
        "split_seed": _W("Split seed", "which training images are held out as validation"),
        "keep": _W("Keep", "last: the adapter after the last epoch; best: after its best validation epoch"),
    },
    "sweep": {
        "a": _W("Model A", "the model whose layers up to each cut are used"),
        "b": _W("Model B", "the model whose layers after each cut finish (A's architecture, any width)"),
        "positions": _W("Cuts", "the cuts visited, in order (comma-separated on a command line); empty: every cut"),
        "metrics": _W("Trait metrics", f"{METRIC_HELP}, comma-separated. Each 0 .. 1 (chance ≈ 1 / classes); "
                      "accuracy, class_acc: higher = better; confusion: higher = stronger relabelling; blackout: "
                      "higher = the kept half suffices; decor: higher = reads the labelled cue"),  # measures/meaning.py's
        "train_data": _W("Adapter training data", "the images the adapters learn from (digits|drop3: never a 3); "
                         "empty: the scored dataset"),
        "seed": _W("Seed", "the adapters' random start and data order; the control twins use seed, seed+1, ..."),
        "control": _W("Random-init control", "also join untrained twins at every cut (the grey band)"),
        "control_seeds": _W("Control pairs", "untrained pairs per cut; the band spans them"),
        "simplicity": _W("Simplicity measures", "gradient norm, sharpness and gzip size at every cut"),
        "sharpness_eps": _W("Sharpness step", "the relative size of the weight perturbations"),
        "sharpness_draws": _W("Sharpness draws", "perturbations averaged"),
        "simplicity_adapter": _W("Count the adapter", "the simplicity measures include the adapter's weights"),
        "simplicity_report": _W("Report's definitions", "also the simplicity measures as the report defines them"),
    },
    "matrix": {
        "mode": _W("Mode", "closed-form: each cell's least-squares fit, then its test accuracy (seconds); trained: "
                   "the fit, then trained; proxy: the fits' held-out R² and CKA alone, nothing scored"),
        "objective": _W("Objective (trained)", "what each cell's adapter learns in trained mode: task (B's labels "
                        "through B's top), match (the copy task: B's own activation at the cut), final (B's own "
                        "final features, its head's input), or a sum such as task+0.5*match"),
        "epochs": _W("Adapter training epochs", "trained mode, and the controls that are task-trained: epochs per "
                     "cell"),
        "seed": _W("Seed", "the adapters' start, the data order and the random controls' weights"),
        "controls": _W("Random controls", "also every cell with a random-init sender, receiver or both (zoo "
                       "models), made as the cells (into a random receiver task-trained where a fit would only "
                       "copy it)"),
        "noise_sender": _W("Noise-sender control", "with controls, the cells whose sender is class-clustered noise "
                           "of each sender cut's shape and scale (a stitch no better than it says nothing about "
                           "A; it needs the activations in memory)"),
        "control_training": _W("Controls' adapters", "matched: made as the cells (a random receiver's task-trained "
                               "when the cells never see the task); task: all task-trained; as-matrix: as the cells"),
        "seeds": _W("Adapter seeds (trained)", "trained mode: each cell's adapter from this many seeds (seed, "
                    "seed+1, ...), with their mean and a 95% t-interval"),
    },
    "transfer": {
        "a": _W("Model A", "whose probe and class directions are carried"),
        "b": _W("Model B", "where they are read, without refitting"),
        "cut_a": _W("Cut in A", "A's layer the probe is fitted on; empty (with B's empty): A's cuts along depth"),
        "cut_b": _W("Cut in B", "B's layer it is carried into; empty: the one at A's relative depth"),
        "max_train": _W("Training images", "the adapter and the probes are fitted on at most this many"),
        "max_test": _W("Test images", "everything is read on at most this many"),
        "seed": _W("Random seed", "the random-init adapter's draw (the floor every transfer is read against)"),
    },
    "similarity": {
        "a": _W("Model A (rows)", "the model whose layers are the rows"),
        "b": _W("Model B (columns)", "the model whose layers are the columns"),
        "measure": _W("Similarity measure", "how the two layers' responses are compared: cka-linear, rsa, "
                      "procrustes ..."),
        "token_mode": _W("Tokens", "mean: one sample per image (tokens averaged); tokens: every token a sample"),
        "dataset": _W("Dataset", "the images compared; empty: the dataset B was trained on"),
        "split": _W("Images compared", "test (held out) or train"),
        "max_samples": _W("Images (cap)", "at most this many images; empty: the whole split"),
        "batch_size": _W("CKA minibatch", "images per minibatch of the debiased CKA (at least 4)"),
        "baseline": _W("Shuffled baseline", "also the measure with the images shuffled"),
        "seed": _W("Seed", "the shuffles of the baseline and the null"),
        "null_permutations": _W("Dependence test permutations", "times B's images are shuffled against A's for "
                                "the dependence test (any two networks fed the same images pass it); 0: none"),
        "random_null_seeds": _W("Untrained-B seeds", "untrained networks of B's architecture measured against A: "
                                "the null a similarity must beat (its mean and 95% interval per cell)"),
        "random_null": _W("Untrained twin", "also A against an untrained copy of B"),
    },
    "merge": {
        "a": _W("Model A", "the base model: its embedding and first blocks"),
        "b": _W("Model B", "the donor: its later blocks replace A's"),
        "start": _W("First block from B", "B's blocks from this one on replace A's"),
        "end": _W("End of B's blocks", "one past the last block taken from B; empty: to the last block"),
        "head": _W("Whose head", _LM_HEAD),
        "embed": _W("Whose embeddings (wte, wpe)", "whose token and position embeddings read the input: a or b"),
    },
    "lmstitch": {
        "a": _W("Model A", "the model whose embedding and first blocks feed the adapter"),
        "b": _W("Model B", "the model whose later blocks continue"),
        "cut_a": _W("Cut in A (blocks)", "A's stream after this many blocks feeds the adapter"),
        "cut_b": _W("Cut in B (blocks)", "B continues after this many of its blocks; empty: as in A"),
        "head": _W("Whose head", _LM_HEAD),
        "head_at": _W("Where A's head takes over", "head a only: after this many of B's blocks; empty: after "
                      "B's last"),
        "alignment": _ALIGNMENT,
    },
    "assemble": {
        "a": _W("Model A", "its layers up to the sender cut feed the adapter"),
        "b": _W("Model B", "its layers after the receiver cut, and its head, finish the network"),
        "senders": _W("Sender cuts of A", "A's cuts whose output feeds an adapter; default: 3 feature-map or token "
                      "cuts spread over depth"),
        "receivers": _W("Receiver cuts of B", "B's cuts that take over; default: 3 feature-map or token cuts spread "
                        "over depth"),
        "kinds": _W("Adapter kinds", "Traft & Cheney's four: linear (1x1 conv), linear_relu, conv3x3_relu, "
                    "bottleneck; lowrank is Bansal et al.'s. A strided linear one is Hernandez et al.'s patch stitch "
                    "(kernel = stride)"),
        "norms": _W("BatchNorm", "where each recipe's adapter normalises: none, bn_before, bn_after, or both (before "
                    "and after the adapter)"),
        "resamples": _W("Rescaling", "the paper's three: bilinear = Downsample (a bilinear 2x downsample before each "
                        "adapter), strided = integrated (each adapter strides by 2; a strided linear one is Hernandez "
                        "et al.'s patch stitch), no_downsample = No Downsample (the sender's larger map goes on into "
                        "B, only where B's rest is convolutional up to a global pooling; otherwise skipped with the "
                        "reason). nearest: upsampling only when chained"),
        "rescale": _W("A gap of more than 2x", "chained (the paper's): one adapter per 2x step, so 8x8 -> 1x1 is three "
                      "adapters, each halving the grid, and every position counts; oneshot (runs before issue 25): "
                      "one adapter and one resize by 8, which reads 4 of the 64 positions"),
        "cls_token": _W("A ViT receiver's class token", "adapter: learned by the adapter, the mean of its patch tokens "
                        "plus a learned offset; receiver: B's own (fixed), B's class token at the receiving cut "
                        "averaged over training images"),
        "finetune_baseline": _W("Also fine-tune each assembled network end to end", "train A's bottom, the adapter "
                                "and B's top together (copies; A and B stay as they are; AdamW): what the parts can "
                                "do beyond the adapter. Not the paper's baseline, which deletes B's intermediate "
                                "blocks and tunes at the best of 3 lrs"),
        "epochs": _W("Epochs per adapter", "passes over the training images for each network's adapter (the "
                     "paper's settings: AdamW, lr 2e-3, weight decay 0.05, cosine to 0)"),
        "finetune_epochs": _W("Fine-tuning epochs", "epochs of the end-to-end fine-tuning"),
        "finetune_lr": _W("Fine-tuning learning rate", "AdamW's step size for the end-to-end fine-tuning"),
        "lr": _W("Learning rate", "AdamW, cosine to 0"),
    },
    "lmdepth": {
        "modes": _W("Curves", "merge (no adapter) and/or stitch (a trained adapter)"),
        "heads": _W("Heads", "whose head reads the result, a, b or both. " + _LM_HEADS),
        "splits": _W("Split positions", "where B takes over, in blocks; empty: every one"),
        "alignment": _ALIGNMENT,
        "heatmap": _W("Heat map", "also stitch every pair (i, j) of positions, with B's head"),
        "embed": _W("Merges' embeddings", "whose wte + wpe read the merges' input. tied: the model whose head is "
                    "used (GPT heads are tied to wte) · a: always A's (the reading of sweeps stored before this "
                    "choice) · b: always B's · stitches read A's"),
    },
}  # fmt: skip

# Shared by the language-model kinds (merge, lmstitch, lmdepth): scoring, samples and the adapter's training.
_LM: dict[str, FieldWords] = {
    "text": _W("Corpus", "the text scored; empty: A's training corpus"),
    "eval_windows": _W("Validation windows", "windows of A's context length scored, the same for every model"),
    "sample_tokens": _W("Sample length", "tokens generated by each model for the samples; 0: none"),
    "seed": _W("Seed", "the samples and the adapter's training"),
    "steps": _W("Adapter training steps", "optimizer steps (the cap when training stops at convergence); "
                "0 keeps the adapter's start"),
    "batch_size": _W("Windows per step", "text windows per optimizer step"),
    "lr": _W("Learning rate", "AdamW's step size, cosine to 0"),
    "mlp_hidden": _W("MLP width", "above 0 adds a GELU MLP branch of this width to the linear map"),
    "until": _W("Train until", "converged: stop when the loss on held-out train text (the last 10% of the training "
                "part, never the validation windows scored here) stops improving by the tolerance over the patience's "
                "checks (0.1% over 4 checks 50 steps apart); the steps are the cap · steps: exactly that many (the "
                "reading of runs stored before)"),
    "start": _W("Start from", "best: the better, on held-out train text, of the init and the identity where widths "
                "are equal (then a head-A stitch after A's last block is A itself) · init: the init only (the reading "
                "of runs stored before)"),
    "adapter.kind": _W("Adapter", "per token: linear, or lowrank (its width below); an MLP width above 0 adds a GELU "
                       "MLP branch starting at zero (the CLI's mlp adapter)"),
    "adapter.init": _W("Adapter init", "lstsq: a least-squares fit of A's stream to B's; random; identity (equal "
                       "widths); procrustes: the best rotation"),
    "objective": _W("Objective", "what the adapter learns: task (next-token loss through B's rest), match (B's own "
                    "stream at the cut), kd (B's next-token odds), or a sum such as task+0.5*match"),
    "check_every": _W("Check every (steps)", "steps between held-out checks when training until converged"),
    "patience": _W("Patience", "checks without improvement before training stops"),
    "tol": _W("Tolerance", "the relative improvement of the held-out loss that counts"),
}  # fmt: skip
for _kind in ("merge", "lmstitch", "lmdepth"):
    _BY_KIND[_kind] = {**_LM, **_BY_KIND[_kind]}


def field_words(kind: str, field: str) -> FieldWords:
    """The label and help line of ``field`` (dotted for a nested one) in a ``kind`` spec; a field no entry names
    reads as its name in words, with no help.

    >>> field_words("merge", "head").label, field_words("similarity", "measure").label
    ('Whose head', 'Similarity measure')
    """
    found = _BY_KIND.get(kind, {}).get(field) or _COMMON.get(field)
    if found is not None:
        return found
    return FieldWords(field.replace(".", " ").replace("_", " ").capitalize(), "")


def known_fields(kind: str) -> set[str]:
    """Every field the table names for ``kind`` (its own entries and the shared ones; for the tests).

    >>> {"epochs", "adapter.init"} <= known_fields("stitch")
    True
    """
    return set(_COMMON) | set(_BY_KIND.get(kind, {}))
