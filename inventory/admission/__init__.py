"""The waiting room: an item whose ``admission`` is ``queue`` is taken only by buyers its room
admitted, in the order they joined, at the item's rate, each with a signed ticket good for one
take (docs/design.md, "Admission")."""
