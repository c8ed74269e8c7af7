"""Pieces that belong to no product: the domain error base and the sale window.

Nothing here imports an app of the project; every app may import from here.
"""
