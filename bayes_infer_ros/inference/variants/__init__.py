"""The paper's nine merged variants (``hybrid``, ``end_to_end``) and the fused family (``fused``), with the
merged transition messages they share (``transitions``). The registry names them (``registry.VARIANT_OPS``)."""
