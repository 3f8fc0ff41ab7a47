"""The int8 recipes: how :func:`~spacy_sapbert.encoding.onnx_encoder.quantize_export` makes ``model.int8.onnx``.

A recipe names a set of ONNX Runtime dynamic-quantization options (weights int8, activations quantized per
batch at run time); the name is recorded in ``onnx_export.json`` (``int8_recipe``) beside the options it
resolved to (``int8_options``) and the file's size and hashes. Loading never looks at the recipe: an int8 file
made by an older recipe (a record without ``int8_recipe`` is ``dynamic``) loads and links as before.

- ``dynamic-pc-l0`` (the default, :data:`NAME_RECIPE`): per-channel int8 weights, the first transformer
  layer's MatMuls left in float32. Chosen on NCBI-disease dev and a BC5CDR-disease train sample
  (``benchmarks/int8_name.py``): the smallest strict acc@1 loss against float32 on both held-back sets.
- ``dynamic``: per-tensor int8 weights, every node quantized (the recipe before 2026-11-28; still what the
  context encoder's ``build-prototypes --quantize`` writes, whose benchmarks were measured with it).

Leaf module: it imports nothing of the package beyond errors.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple, Union

from ..errors import ConfigError, Errors, Warnings

# the node names of the first transformer layer in torch's ONNX export: BERT / RoBERTa / XLM-R
# (``/inner/encoder/layer.0/...``), DistilBERT (``/transformer/layer.0/``), ``layers.0`` in newer models
_LAYER = r"/(?:layer|layers)\.{index}/"


@dataclass(frozen=True)
class Int8Recipe:
    """One way of quantizing an ONNX export: ``quantize_dynamic``'s options, and ``float_layers``, the
    transformer layers (0 = the first) whose MatMul nodes stay float32."""

    name: str
    per_channel: bool = False
    reduce_range: bool = False
    op_types: Tuple[str, ...] = ()
    float_layers: Tuple[int, ...] = ()
    description: str = field(default="", compare=False)

    def exclude_nodes(self, graph_nodes: List[Tuple[str, str]]) -> List[str]:
        """The names of the nodes kept float32, from ``(name, op_type)`` pairs of the graph (sorted)."""
        if not self.float_layers:
            return []
        pattern = re.compile("|".join(_LAYER.format(index=i) for i in self.float_layers))
        return sorted(name for name, op in graph_nodes if op == "MatMul" and pattern.search(name))

    def options(self, exclude_nodes: List[str]) -> Dict[str, Any]:
        """What ``onnx_export.json`` records as ``int8_options`` (the same keys as before recipes had names)."""
        return {"per_channel": self.per_channel, "reduce_range": self.reduce_range,
                "op_types": sorted(self.op_types), "exclude_nodes": sorted(exclude_nodes)}


RECIPES: Dict[str, Int8Recipe] = {
    "dynamic": Int8Recipe("dynamic", description="per-tensor int8 weights, every node quantized"),
    "dynamic-pc-l0": Int8Recipe("dynamic-pc-l0", per_channel=True, float_layers=(0,),
                                description="per-channel int8 weights, the first transformer layer float32"),
}
NAME_RECIPE = "dynamic-pc-l0"  # what `export-onnx --quantize` and the linker's precision 'int8' write
LEGACY_RECIPE = "dynamic"  # what a record without `int8_recipe` was made by


def get_recipe(recipe: Union[str, Int8Recipe]) -> Int8Recipe:
    """The recipe named ``recipe`` (E828 for an unknown name); an :class:`Int8Recipe` is returned as it is."""
    if isinstance(recipe, Int8Recipe):
        return recipe
    if recipe not in RECIPES:
        raise ConfigError(Errors.E828.format(value=recipe, choices=", ".join(sorted(RECIPES))))
    return RECIPES[recipe]


def recorded_recipe(recorded: Dict[str, Any]) -> str:
    """The recipe an ``onnx_export.json`` record names (``dynamic`` for one written before recipes had names;
    ``""`` when it records no int8 file)."""
    if not recorded.get("int8"):
        return ""
    return str(recorded.get("int8_recipe") or LEGACY_RECIPE)


def nodes_to_exclude(recipe: Int8Recipe, model_path: Any) -> List[str]:
    """The nodes of the ONNX file at ``model_path`` that ``recipe`` keeps float32 (W812 when it names float
    layers but the graph has no node of theirs: everything is then quantized)."""
    if not recipe.float_layers:
        return []
    import onnx  # lazy: onnx (the export's own requirement; quantizing needs it anyway)

    model = onnx.load(str(model_path), load_external_data=False)
    found = recipe.exclude_nodes([(node.name, node.op_type) for node in model.graph.node])
    if not found:
        warnings.warn(Warnings.W812.format(path=model_path, recipe=recipe.name, layers=list(recipe.float_layers)))
    return found


__all__ = ["Int8Recipe", "RECIPES", "NAME_RECIPE", "LEGACY_RECIPE", "get_recipe", "recorded_recipe",
           "nodes_to_exclude"]
