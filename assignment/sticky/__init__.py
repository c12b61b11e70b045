"""Sticky assignors: one shared algorithm (core), eager and cooperative front-ends."""

from assignment.sticky.assignors import CooperativeStickyAssignor, StickyAssignor
from assignment.sticky.core import MemberData, sticky_assign

__all__ = ["CooperativeStickyAssignor", "MemberData", "StickyAssignor", "sticky_assign"]
