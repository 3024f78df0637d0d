"""A griffe extension: functions that a module creates at import time are documented from
the live object.

Griffe reads the source (static analysis), where ``stack = _joiner(np.stack)`` in
tracked/numpy is an attribute without a docstring; the function it makes has one.  For
such attributes of tracked's modules, the live object is inspected instead, so the API
reference shows its signature and docstring.
"""
import inspect

import griffe

logger = griffe.get_logger('tracked.inspect_dynamic')


class InspectDynamic(griffe.Extension):
    def on_attribute_instance(self, *, node, attr, agent, **kwargs):
        if not attr.path.startswith('tracked.') or attr.docstring is not None:
            return
        try:
            value = griffe.dynamic_import(attr.path)
        except ImportError:
            return
        if not inspect.isfunction(value) or not inspect.getdoc(value):
            return
        module = griffe.inspect(attr.module.path, filepath=attr.filepath)
        if attr.name in module.members:
            attr.parent.set_member(attr.name, module[attr.name])
