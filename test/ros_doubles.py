# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Stand-ins for rclpy, rcl_interfaces and rosidl-generated messages (ROS 2 is not installed here).

:func:`install` puts them into ``sys.modules`` (through pytest's ``monkeypatch``) and reloads
the modules of rog_ros that import rclpy; :func:`uninstall` undoes that. They follow
ros2/rclpy and ros2/rosidl_python (branches humble and jazzy) where rog_ros depends on it:

* generated messages (``rosidl_generator_py/resource/_msg.py.em``): ``__slots__``,
  ``get_fields_and_field_types()`` with IDL type names (``.msg`` ``byte`` is ``'octet'``), and
  property setters that assert exact Python types: an octet takes ``bytes`` of length 1, an
  integer an ``int`` in range, a float a ``float``, a nested field an instance of its class, a
  sequence a list of such (numeric sequences are stored as ``array.array``);
* ``Node.declare_parameter``: the type comes from the default, rclpy's overrides (``-p``,
  ``--params-file`` of ``rclpy.init``'s arguments) replace the value unless
  ``ignore_override``, and an override of another type raises InvalidParameterTypeException;
  ``set_parameters`` checks read-only, type and range, then calls the on-set callbacks;
* ``Node.executor``'s setter moves a node between executors (``Executor.add_node`` sets it),
  and ``rclpy.spin_once(node)`` adds the node to the global executor, then removes it;
* ``SingleThreadedExecutor``: one ready callback per ``spin_once``. A ``spin_once`` from one of
  its own callbacks, and a ``shutdown()`` (which waits until no callback runs) from one of
  them, are refused: recorded in :attr:`Ros.violations` and raised (rclpy would hang);
* ``LifecycleNode``: the managed-node state machine; ``trigger_*`` return the callback's
  TransitionCallbackReturn, a callback that raises gives ERROR, a transition the current
  state does not have raises RCLError; ``change_state`` requests are served by the executor;
* one graph per context: a publisher delivers to the subscriptions on its topic (a callback
  queued on the subscribing node), and the matched counts come from it;
* the graph API (``rclpy/node.py`` ``get_publishers_info_by_topic`` /
  ``get_subscriptions_info_by_topic``, ``rclpy/topic_endpoint_info.py``): a list of
  TopicEndpointInfo per call, ``topic_type`` as ``'rog_ros/msg/RowChunk'``, ``endpoint_gid`` a
  list of ints (rmw_gid_t: 24 bytes on Humble, 16 on Iron and newer) that starts with the
  participant's 12-byte GUID prefix (one a node: each node of a test stands for a process
  of its own, with its participant, as a peer robot's is), and, on Jazzy only,
  ``topic_type_hash`` (a TypeHash: version 1 and 32 bytes; version 0 for a peer that sent
  none). Endpoints of other processes (a robot of another build, ``ros2 topic echo``) are
  :meth:`Ros.add_remote`'s; this process's endpoints are listed too, as rclpy lists them.
  A remote endpoint is matched (``get_subscription_count``) with this type name, whatever
  its hash: rmw_cyclonedds (humble, jazzy: ``serdata.cpp``'s ``sertype_rmw_ops``, "not yet
  providing type discovery, assignability checking") gives Cyclone no type information, so
  DDS matches by type name; ``count_publishers`` counts every publisher of the topic, as
  rcl's does; ``rclpy.get_rmw_implementation_identifier()`` is :attr:`Ros.rmw`.

The world outside the process (a peer robot, ``ros2 lifecycle set``) moves on at every
``spin_once`` of an executor of the context: :attr:`Ros.on_tick`.
"""

from __future__ import annotations

import array
from collections import deque, UserList
from collections.abc import Sequence, Set
import copy
import enum
import functools
import importlib
import math
import sys
import time
import types
import weakref

import yaml

_INT_RANGES = {
    'int8': (-2 ** 7, 2 ** 7), 'uint8': (0, 2 ** 8), 'int16': (-2 ** 15, 2 ** 15),
    'uint16': (0, 2 ** 16), 'int32': (-2 ** 31, 2 ** 31), 'uint32': (0, 2 ** 32),
    'int64': (-2 ** 63, 2 ** 63), 'uint64': (0, 2 ** 64),
}
_TYPECODES = {
    'float': 'f', 'double': 'd', 'int8': 'b', 'uint8': 'B', 'int16': 'h', 'uint16': 'H',
    'int32': 'i', 'uint32': 'I', 'int64': 'q', 'uint64': 'Q',
}
"""rosidl_generator_py's SPECIAL_NESTED_BASIC_TYPES: sequences of these are array.array."""
_FLOAT_BOUNDS = {'float': 3.402823466e+38, 'double': 1.7976931348623157e+308}
_MSG_TO_IDL = {'bool': 'boolean', 'byte': 'octet', 'char': 'uint8', 'float32': 'float',
               'float64': 'double'}
"""``.msg`` primitive -> IDL type name (rosidl_adapter)."""

STANDARD = {
    'builtin_interfaces/Time': [('sec', 'int32'), ('nanosec', 'uint32')],
    'std_msgs/Header': [('stamp', 'builtin_interfaces/Time'), ('frame_id', 'string')],
    'diagnostic_msgs/KeyValue': [('key', 'string'), ('value', 'string')],
    'diagnostic_msgs/DiagnosticStatus': [
        ('level', 'octet'), ('name', 'string'), ('message', 'string'),
        ('hardware_id', 'string'), ('values', 'sequence<diagnostic_msgs/KeyValue>')],
    'diagnostic_msgs/DiagnosticArray': [
        ('header', 'std_msgs/Header'),
        ('status', 'sequence<diagnostic_msgs/DiagnosticStatus>')],
    'rcl_interfaces/IntegerRange': [
        ('from_value', 'int64'), ('to_value', 'int64'), ('step', 'uint64')],
    'rcl_interfaces/FloatingPointRange': [
        ('from_value', 'double'), ('to_value', 'double'), ('step', 'double')],
    'rcl_interfaces/ParameterDescriptor': [
        ('name', 'string'), ('type', 'uint8'), ('description', 'string'),
        ('additional_constraints', 'string'), ('read_only', 'boolean'),
        ('dynamic_typing', 'boolean'),
        ('floating_point_range', 'sequence<rcl_interfaces/FloatingPointRange, 1>'),
        ('integer_range', 'sequence<rcl_interfaces/IntegerRange, 1>')],
    'rcl_interfaces/SetParametersResult': [('successful', 'boolean'), ('reason', 'string')],
    'rcl_interfaces/ParameterType': [],
}
"""The real field types of the standard messages rog_ros uses (from their .msg/.idl)."""

CONSTANTS = {
    'diagnostic_msgs/DiagnosticStatus': {
        'OK': b'\x00', 'WARN': b'\x01', 'ERROR': b'\x02', 'STALE': b'\x03'},
    'rcl_interfaces/ParameterType': {
        'PARAMETER_NOT_SET': 0, 'PARAMETER_BOOL': 1, 'PARAMETER_INTEGER': 2,
        'PARAMETER_DOUBLE': 3, 'PARAMETER_STRING': 4, 'PARAMETER_BYTE_ARRAY': 5},
}


# ---------------------------------------------------------------------- rosidl messages
def _split(field_type: str) -> tuple:
    """Return ``(element type, is_sequence, bound)`` of a rosidl field type string."""
    if field_type.startswith('sequence<'):
        element, _, bound = field_type[len('sequence<'):-1].partition(',')
        return element.strip(), True, int(bound) if bound.strip() else 0
    return field_type, False, 0


class Messages:
    """The generated message classes of one stand-in install, by ``'pkg/Type'``."""

    def __init__(self):
        self.classes = {}

    def _check(self, name: str, element: str, value) -> None:
        """Assert what the generated setter asserts of one value of type ``element``."""
        if '/' in element:
            cls = self.classes[element]
            assert isinstance(value, cls), \
                f"The '{name}' field must be a sub message of type '{cls.__name__}'"
        elif element == 'octet':      # rosidl: isinstance(value, (bytes, ByteString))
            assert isinstance(value, (bytes, bytearray)) and len(value) == 1, \
                f"The '{name}' field must be of type 'bytes' or 'ByteString' with length 1"
        elif element == 'boolean':
            assert isinstance(value, bool), f"The '{name}' field must be of type 'bool'"
        elif element in _FLOAT_BOUNDS:
            bound = _FLOAT_BOUNDS[element]
            assert isinstance(value, float), f"The '{name}' field must be of type 'float'"
            assert not (value < -bound or value > bound) or math.isinf(value), \
                f"The '{name}' field must be a {element} in [{-bound}, {bound}]"
        elif element in _INT_RANGES:
            low, high = _INT_RANGES[element]
            assert isinstance(value, int), f"The '{name}' field must be of type 'int'"
            assert low <= value < high, \
                f"The '{name}' field must be an integer in [{low}, {high - 1}]"
        elif element.startswith('string'):
            bound = int(element[len('string<'):-1]) if element != 'string' else 0
            assert isinstance(value, str) and (not bound or len(value) <= bound), \
                f"The '{name}' field must be of type 'str'"
        else:
            raise AssertionError(f'the stand-in does not model field type {element!r}')

    def _setter(self, name: str, field_type: str):
        element, sequence, bound = _split(field_type)
        code = _TYPECODES.get(element)

        def set_field(msg, value):
            if sequence and code is not None and isinstance(value, array.array):
                assert value.typecode == code, \
                    f"The '{name}' array.array() must have the type code of '{code}'"
                assert not bound or len(value) <= bound
            elif sequence:
                assert (isinstance(value, (Sequence, Set, UserList))
                        and not isinstance(value, str)), \
                    f"The '{name}' field must be a set or sequence"
                assert not bound or len(value) <= bound, \
                    f"The '{name}' field must be a set or sequence with length <= {bound}"
                for item in value:
                    self._check(name, element, item)
                if code is not None:
                    value = array.array(code, value)
            else:
                self._check(name, element, value)
            setattr(msg, '_' + name, value)
        return set_field

    def _default(self, field_type: str):
        element, sequence, _ = _split(field_type)
        if sequence:
            return array.array(_TYPECODES[element]) if element in _TYPECODES else []
        if '/' in element:
            return self.classes[element]()
        if element == 'octet':
            return bytes([0])
        if element in _FLOAT_BOUNDS:
            return 0.0
        if element in _INT_RANGES:
            return 0
        return False if element == 'boolean' else ''

    def define(self, full_name: str, fields, constants=None) -> type:
        """Define the class rosidl_generator_py generates for ``full_name`` with ``fields``."""
        pkg, short = full_name.split('/')
        fields = list(fields)
        messages = self

        def __init__(msg, **kwargs):
            unknown = sorted(k for k in kwargs if '_' + k not in msg.__slots__)
            assert not unknown, 'Invalid arguments passed to constructor: ' + ', '.join(unknown)
            for fname, ftype in fields:
                setattr(msg, fname, kwargs[fname] if fname in kwargs
                        else messages._default(ftype))

        def __eq__(msg, other):
            return isinstance(other, msg.__class__) and all(
                getattr(msg, f) == getattr(other, f) for f, _ in fields)

        def __repr__(msg):
            inner = ', '.join(f'{f}={getattr(msg, f)!r}' for f, _ in fields)
            return f'{pkg}.msg.{short}({inner})'

        body = {
            '__slots__': ['_' + f for f, _ in fields], '__module__': f'{pkg}.msg',
            '_fields_and_field_types': dict(fields), '__init__': __init__, '__eq__': __eq__,
            '__repr__': __repr__,
            'get_fields_and_field_types': classmethod(
                lambda cls: copy.copy(cls._fields_and_field_types)),
        }
        for fname, ftype in fields:
            body[fname] = property(lambda msg, _n=fname: getattr(msg, '_' + _n),
                                   self._setter(fname, ftype))
        body.update(constants or {})
        cls = type(short, (), body)
        self.classes[full_name] = cls
        return cls

    def define_from_msg(self, full_name: str, msgdef) -> type:
        """Define ``full_name`` from its parsed ``.msg`` (rog_ros's own ``msg/``)."""
        fields = []
        for f in msgdef.fields:
            element = _MSG_TO_IDL.get(f.base, f.base)
            if f.base == 'string' and f.str_bound:
                element = f'string<{f.str_bound}>'
            if f.array == 'array':
                raise AssertionError(f'{full_name}.{f.name}: fixed arrays are not modelled')
            if f.array == 'sequence':
                element = f'sequence<{element}, {f.bound}>' if f.bound else \
                    f'sequence<{element}>'
            fields.append((f.name, element))
        return self.define(full_name, fields)

    def module(self, pkg: str) -> types.ModuleType:
        """Return ``<pkg>.msg`` with the classes of ``pkg``."""
        mod = types.ModuleType(f'{pkg}.msg')
        for full_name, cls in self.classes.items():
            if full_name.split('/')[0] == pkg:
                setattr(mod, full_name.split('/')[1], cls)
        return mod


# ---------------------------------------------------------------------- rclpy
class RCLError(RuntimeError):
    """``rclpy._rclpy_pybind11.RCLError``."""


class ParameterException(Exception):
    """``rclpy.exceptions.ParameterException``."""


class InvalidParameterTypeException(ParameterException):
    """``rclpy.exceptions.InvalidParameterTypeException``."""

    def __init__(self, desired_parameter, expected_type, *args):
        Exception.__init__(
            self, f"Trying to set parameter '{desired_parameter.name}' to "
                  f"'{desired_parameter.value}' of type '{desired_parameter.type_.name}', "
                  f"expecting type '{expected_type}'", *args)


class InvalidParameterValueException(ParameterException):
    """``rclpy.exceptions.InvalidParameterValueException``."""


class ParameterAlreadyDeclaredException(ParameterException):
    """``rclpy.exceptions.ParameterAlreadyDeclaredException``."""


class ParameterType(enum.IntEnum):
    """``rclpy.parameter.Parameter.Type`` (the values of rcl_interfaces ParameterType)."""

    NOT_SET = 0
    BOOL = 1
    INTEGER = 2
    DOUBLE = 3
    STRING = 4

    @classmethod
    def from_parameter_value(cls, value) -> 'ParameterType':
        """Return the type of a Python value, as rclpy infers it."""
        if value is None:
            return cls.NOT_SET
        if isinstance(value, bool):
            return cls.BOOL
        if isinstance(value, int):
            return cls.INTEGER
        if isinstance(value, float):
            return cls.DOUBLE
        if isinstance(value, str):
            return cls.STRING
        raise TypeError(f'The given value is not one of the allowed types {value!r}.')


class Parameter:
    """``rclpy.parameter.Parameter``."""

    Type = ParameterType

    def __init__(self, name, type_=None, value=None):
        self._name, self._value = name, value
        self._type_ = ParameterType.from_parameter_value(value) if type_ is None else type_

    @property
    def name(self):
        return self._name

    @property
    def value(self):
        return self._value

    @property
    def type_(self):
        return self._type_


class TransitionCallbackReturn(enum.Enum):
    """``rclpy.lifecycle.TransitionCallbackReturn``."""

    SUCCESS = 'success'
    FAILURE = 'failure'
    ERROR = 'error'


_TRANSITIONS = {
    'configure': (('unconfigured',), 'inactive', 'on_configure'),
    'cleanup': (('inactive',), 'unconfigured', 'on_cleanup'),
    'activate': (('inactive',), 'active', 'on_activate'),
    'deactivate': (('active',), 'inactive', 'on_deactivate'),
    'shutdown': (('unconfigured', 'inactive', 'active'), 'finalized', 'on_shutdown'),
}
"""Transition -> (states it leaves from, goal state, callback): rcl_lifecycle's default."""


class Ros:
    """One install of the stand-ins: modules, the context's graph, what happened."""

    def __init__(self, deadline_s: float = 20.0, distro: str = 'jazzy'):
        if distro not in ('humble', 'jazzy'):
            raise ValueError(f'distro: humble or jazzy, got {distro!r}')
        self.distro = distro
        self.rmw = 'rmw_cyclonedds_cpp'   # rclpy.get_rmw_implementation_identifier()
        self.remote = []              # RemoteEndpoint of other processes on the graph
        self.graph_queries = 0        # get_*_info_by_topic calls
        self._entity = 0              # entity ids of this context's endpoints
        self.messages = Messages()
        self.violations = []          # what real rclpy would hang on or refuse
        self.logs = []                # (severity, logger name, message)
        self.on_tick = []             # the world outside: called at every executor turn
        self.args = None              # rclpy.init(args=...)
        self.signal_handler_options = None
        self.ok = False
        self.nodes, self.executors = [], []
        self.publishers, self.subscriptions = [], []
        self.running = []             # executors inside one of their callbacks now
        self.deadline = time.monotonic() + deadline_s
        self.on_deadline = None       # called once when the test runs out of time
        self._global_executor = None
        self._ticking = False
        self.Node, self.SingleThreadedExecutor, self.LifecycleNode = self._classes()

    # -------------------------------------------------------------- the test's view
    def violation(self, what: str) -> None:
        """Record and raise what rclpy would not survive."""
        self.violations.append(what)
        raise RuntimeError(what)

    def in_callback(self) -> bool:
        """Tell whether an executor callback runs now (the caller is inside one)."""
        return bool(self.running)

    def tick(self) -> None:
        """Let the world outside move on (one executor turn; not again from inside a tick)."""
        if self._ticking:
            return
        self._ticking = True
        try:
            if self.on_deadline is not None and time.monotonic() > self.deadline:
                hook, self.on_deadline = self.on_deadline, None
                hook()
            for hook in list(self.on_tick):
                hook()
        finally:
            self._ticking = False

    def node(self, name: str):
        """Return the (last) node named ``name``."""
        return [n for n in self.nodes if n.get_name() == name][-1]

    def overrides(self, node_name: str) -> dict:
        """Return rclpy's parameter overrides of ``node_name``: --params-file, then -p."""
        files, params, inside = [], [], False
        args = list(self.args or [])
        for i, arg in enumerate(args):
            if arg == '--ros-args':
                inside = True
            elif arg == '--':
                inside = False
            elif inside and arg == '--params-file':
                files.append(args[i + 1])
            elif inside and arg in ('-p', '--param'):
                params.append(args[i + 1])
        out = {}
        for path in files:
            with open(path, encoding='utf-8') as fh:
                data = yaml.safe_load(fh) or {}
            for key in ('/**', node_name, '/' + node_name):
                out.update((data.get(key) or {}).get('ros__parameters') or {})
        for text in params:
            name, value = text.split(':=', 1)
            out[name] = yaml.safe_load(value)     # rcl reads -p values as YAML
        return out

    def add_remote(self, prefix: bytes, node_name: str, topic: str, writer: bool,
                   topic_type: str, type_hash='ours', namespace: str = '/'):
        """
        Put an endpoint of another process on the graph; return it (``.gone = True`` ends it).

        ``topic_type``: ``'rog_ros/msg/RowChunk'``; ``type_hash``: ``'ours'`` (this build's
        for that type), a ``RIHS01_<hex>`` string, or None (a peer that sends none).
        """
        if type_hash == 'ours':
            type_hash = _hash_of(topic_type)
        self._entity += 1
        end = RemoteEndpoint(bytes(prefix), node_name, namespace, topic, writer, topic_type,
                             type_hash, self._entity)
        self.remote.append(end)
        return end

    def gid(self, prefix: bytes, entity: int) -> list:
        """Return an rmw_gid_t's data as rclpy gives it: a list of ints, zero-padded."""
        data = bytes(prefix) + entity.to_bytes(4, 'big')
        return list(data.ljust(24 if self.distro == 'humble' else 16, b'\0'))

    def endpoint_info(self, node_name, namespace, topic_type, type_hash, writer, gid):
        """Return a TopicEndpointInfo as this distro's rclpy builds it."""
        kwargs = {'node_name': node_name, 'node_namespace': namespace,
                  'topic_type': topic_type, 'endpoint_type': 1 if writer else 2,
                  'endpoint_gid': gid, 'qos_profile': QoSProfile()}
        if self.distro == 'humble':
            return TopicEndpointInfoHumble(**kwargs)
        if type_hash is None:
            hashed = TypeHash(0, bytes(32))
        else:
            version, _, value = type_hash.partition('_')
            hashed = TypeHash(int(version[len('RIHS'):]), bytes.fromhex(value))
        return TopicEndpointInfo(topic_type_hash=hashed, **kwargs)

    # -------------------------------------------------------------- the modules
    def build_modules(self) -> dict:
        """Return ``{module name: module}`` of every stand-in."""
        from rog_ros.transport import field_plans
        from rog_ros.transport.field_plans import MESSAGE_CLASSES
        for full_name, fields in STANDARD.items():
            self.messages.define(full_name, fields, CONSTANTS.get(full_name))
        for name in MESSAGE_CLASSES:
            self.messages.define_from_msg(f'rog_ros/{name}', field_plans.msg_def(name))
        mods = {}
        for pkg in ('builtin_interfaces', 'std_msgs', 'diagnostic_msgs', 'rcl_interfaces'):
            mods[pkg] = types.ModuleType(pkg)
            mods[f'{pkg}.msg'] = self.messages.module(pkg)
            mods[pkg].msg = mods[f'{pkg}.msg']
        mods['rog_ros.msg'] = self.messages.module('rog_ros')
        rclpy = mods['rclpy'] = types.ModuleType('rclpy')
        rclpy.init, rclpy.ok, rclpy.shutdown = self._init, self._ok, self._shutdown
        rclpy.spin_once, rclpy.create_node = self._spin_once, self._create_node
        rclpy.get_global_executor = self._get_global_executor
        rclpy.get_rmw_implementation_identifier = lambda: self.rmw
        node_cls, executor_cls, lifecycle_cls = \
            self.Node, self.SingleThreadedExecutor, self.LifecycleNode
        subs = {
            'node': {'Node': node_cls},
            'executors': {'Executor': executor_cls, 'SingleThreadedExecutor': executor_cls},
            'lifecycle': {'LifecycleNode': lifecycle_cls, 'Node': lifecycle_cls,
                          'TransitionCallbackReturn': TransitionCallbackReturn},
            'parameter': {'Parameter': Parameter},
            'exceptions': {
                'ParameterException': ParameterException,
                'InvalidParameterTypeException': InvalidParameterTypeException,
                'InvalidParameterValueException': InvalidParameterValueException,
                'ParameterAlreadyDeclaredException': ParameterAlreadyDeclaredException},
            'signals': {'SignalHandlerOptions': enum.Enum(
                'SignalHandlerOptions', 'ALL NO SIGINT SIGTERM')},
            'qos': {'QoSProfile': QoSProfile,
                    'ReliabilityPolicy': enum.Enum('ReliabilityPolicy',
                                                   'SYSTEM_DEFAULT RELIABLE BEST_EFFORT'),
                    'HistoryPolicy': enum.Enum('HistoryPolicy',
                                               'SYSTEM_DEFAULT KEEP_LAST KEEP_ALL'),
                    'DurabilityPolicy': enum.Enum('DurabilityPolicy',
                                                  'SYSTEM_DEFAULT TRANSIENT_LOCAL VOLATILE')},
        }
        for sub, names in subs.items():
            mod = types.ModuleType(f'rclpy.{sub}')
            for name, value in names.items():
                setattr(mod, name, value)
            mods[f'rclpy.{sub}'] = mod
            setattr(rclpy, sub, mod)
        return mods

    def _init(self, *, args=None, context=None, domain_id=None, signal_handler_options=None):
        if self.ok:
            raise RuntimeError('Context.init() must only be called once')
        self.args, self.ok = list(args or []), True
        self.signal_handler_options = signal_handler_options

    def _ok(self, *, context=None) -> bool:
        return self.ok

    def _shutdown(self, *, context=None) -> None:
        if not self.ok:
            raise RCLError('failed to shutdown: rcl_shutdown already called on the given '
                           'context')
        self.ok = False

    def _create_node(self, node_name, **kwargs):
        return self.Node(node_name, **kwargs)

    def _get_global_executor(self):
        if self._global_executor is None:
            self._global_executor = self.SingleThreadedExecutor()
        return self._global_executor

    def _spin_once(self, node, *, executor=None, timeout_sec=None) -> None:
        executor = self._get_global_executor() if executor is None else executor
        try:
            executor.add_node(node)
            executor.spin_once(timeout_sec=timeout_sec)
        finally:
            executor.remove_node(node)

    def _classes(self) -> tuple:
        """Return (Node, SingleThreadedExecutor, LifecycleNode) bound to this install."""
        ros = self

        class Logger:
            """rclpy's RcutilsLogger: one message string per call."""

            def __init__(self, name):
                self.name = name

            def _log(self, severity, message):
                if not isinstance(message, str):
                    raise TypeError('the message of an rclpy logger must be a str')
                ros.logs.append((severity, self.name, message))
                return True

            def debug(self, message, **kwargs):
                return self._log('DEBUG', message)

            def info(self, message, **kwargs):
                return self._log('INFO', message)

            def warning(self, message, **kwargs):
                return self._log('WARN', message)

            warn = warning

            def error(self, message, **kwargs):
                return self._log('ERROR', message)

            def fatal(self, message, **kwargs):
                return self._log('FATAL', message)

        class Endpoint:
            """A publisher or subscription on the context's graph."""

            def __init__(self, node, msg_type, topic, qos, callback=None):
                if not isinstance(qos, (QoSProfile, int)):
                    raise TypeError('qos_profile must be a QoSProfile or a history depth')
                self.node, self.msg_type, self.topic = node, msg_type, topic
                self.callback, self.destroyed, self.published = callback, False, []
                ros._entity += 1
                self.gid = ros.gid(node.prefix, ros._entity)
                pkg = msg_type.__module__.split('.')[0]
                self.type_name = f'{pkg}/msg/{msg_type.__name__}'

            def publish(self, msg):
                if not isinstance(msg, self.msg_type):
                    raise TypeError(f'Expected {self.msg_type}, got {type(msg)}')
                self.published.append(msg)
                for sub in ros.subscriptions:
                    if sub.topic == self.topic and not sub.destroyed and \
                            sub.msg_type is self.msg_type:
                        sub.node.work.append(
                            functools.partial(sub.callback, copy.deepcopy(msg)))

            def get_subscription_count(self):
                # (by type name only: rmw_cyclonedds's sertype gives Cyclone no type
                # information, "not yet providing type discovery, assignability checking")
                return sum(1 for s in ros.subscriptions
                           if s.topic == self.topic and not s.destroyed) + sum(
                    1 for e in ros.remote if not e.gone and not e.writer and
                    e.topic == self.topic and e.topic_type == self.type_name)

        class Node:
            """rclpy.node.Node."""

            def __init__(self, node_name, *, context=None, namespace=None, **kwargs):
                if not ros.ok:
                    raise RCLError('Failed to create node: the given context is not valid')
                self._name = node_name
                self._namespace = '/' + (namespace or '').strip('/')   # as rcl makes it
                self._parameters, self._descriptors, self._on_set = {}, {}, []
                self._parameter_overrides = ros.overrides(node_name)
                self._executor_ref = None
                self.work = deque()          # ready callbacks, for the node's executor
                # its participant's GUID prefix: each node of a test stands for a process
                self.prefix = bytes([0x10 + len(ros.nodes) % 0xe0]) + bytes(range(0x11, 0x1c))
                self.destroyed = False
                ros.nodes.append(self)

            @property
            def context(self):
                return ros

            def get_name(self):
                return self._name

            def get_namespace(self):
                return self._namespace

            def get_logger(self):
                return Logger(self._name)

            @property
            def executor(self):
                return self._executor_ref() if self._executor_ref else None

            @executor.setter
            def executor(self, new_executor):
                current = self.executor
                if current == new_executor:
                    return
                if current is not None:
                    current.remove_node(self)
                if new_executor is None:
                    self._executor_ref = None
                else:
                    new_executor.add_node(self)
                    self._executor_ref = weakref.ref(new_executor)

            # ---------------------------------------------------------- parameters
            def declare_parameter(self, name, value=None, descriptor=None,
                                  ignore_override=False):
                descriptor = descriptor if descriptor is not None else \
                    ros.messages.classes['rcl_interfaces/ParameterDescriptor']()
                if not isinstance(descriptor,
                                  ros.messages.classes['rcl_interfaces/ParameterDescriptor']):
                    raise TypeError(f'Third element {descriptor} at index 0 in parameters '
                                    'list is not a ParameterDescriptor.')
                if name in self._parameters:
                    raise ParameterAlreadyDeclaredException([name])
                if not descriptor.dynamic_typing and value is not None:
                    descriptor.type = ParameterType.from_parameter_value(value).value
                if not ignore_override and name in self._parameter_overrides:
                    value = self._parameter_overrides[name]
                param = Parameter(name, value=value)
                reason = self._rejected(param, descriptor, check_read_only=False)
                if reason is not None:
                    if reason.startswith('Wrong parameter type'):
                        raise InvalidParameterTypeException(
                            param, ParameterType(descriptor.type).name)
                    raise InvalidParameterValueException(name, value, reason)
                for callback in self._on_set:
                    if not callback([param]).successful:
                        raise InvalidParameterValueException(name, value, 'callback')
                descriptor.name = name
                self._parameters[name], self._descriptors[name] = param, descriptor
                return param

            def _rejected(self, param, descriptor, check_read_only=True):
                """Return why rclpy refuses ``param`` (its _apply_descriptor), else None."""
                if check_read_only and descriptor.read_only:
                    return f'Trying to set a read-only parameter: {param.name}.'
                if param.type_ != ParameterType.NOT_SET and \
                        param.type_.value != descriptor.type:
                    return ('Wrong parameter type, expected '
                            f"'{ParameterType(descriptor.type)}' got '{param.type_}'")
                ranges = descriptor.integer_range if param.type_ == ParameterType.INTEGER \
                    else descriptor.floating_point_range \
                    if param.type_ == ParameterType.DOUBLE else []
                if ranges:
                    low = min(ranges[0].from_value, ranges[0].to_value)
                    high = max(ranges[0].from_value, ranges[0].to_value)
                    if not low <= param.value <= high:
                        return f'Parameter {param.name} out of range'
                return None

            def get_parameter(self, name):
                return self._parameters[name]

            def describe_parameter(self, name):
                return self._descriptors[name]

            def add_on_set_parameters_callback(self, callback):
                self._on_set.insert(0, callback)

            def set_parameters(self, parameter_list):
                result_cls = ros.messages.classes['rcl_interfaces/SetParametersResult']
                results = []
                for param in parameter_list:
                    reason = self._rejected(param, self._descriptors[param.name])
                    result = result_cls(successful=reason is None, reason=reason or '')
                    if result.successful:
                        for callback in self._on_set:
                            result = callback([param])
                            if not result.successful:
                                break
                    if result.successful:
                        self._parameters[param.name] = param
                    results.append(result)
                return results

            # ---------------------------------------------------------- endpoints
            def create_publisher(self, msg_type, topic, qos_profile, **kwargs):
                pub = Endpoint(self, msg_type, topic, qos_profile)
                ros.publishers.append(pub)
                return pub

            def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
                sub = Endpoint(self, msg_type, topic, qos_profile, callback)
                ros.subscriptions.append(sub)
                return sub

            def destroy_publisher(self, publisher):
                publisher.destroyed = True
                ros.publishers.remove(publisher)
                return True

            def destroy_subscription(self, subscription):
                subscription.destroyed = True
                ros.subscriptions.remove(subscription)
                return True

            def count_publishers(self, topic):
                return sum(1 for p in ros.publishers if p.topic == topic) + sum(
                    1 for e in ros.remote if e.writer and not e.gone and e.topic == topic)

            def _info_by_topic(self, topic_name, writer):
                ros.graph_queries += 1
                if not ros.ok:
                    raise RCLError('the given context is not valid')
                if not topic_name.startswith('/'):          # (rclpy expands a relative one)
                    topic_name = self._namespace.rstrip('/') + '/' + topic_name
                out = [ros.endpoint_info(e.node._name, e.node._namespace, e.type_name,
                                         _hash_of(e.type_name), writer, e.gid)
                       for e in (ros.publishers if writer else ros.subscriptions)
                       if e.topic == topic_name and not e.destroyed]
                return out + [
                    ros.endpoint_info(e.node_name, e.namespace, e.topic_type, e.type_hash,
                                      writer, ros.gid(e.prefix, e.entity))
                    for e in ros.remote
                    if e.writer == writer and e.topic == topic_name and not e.gone]

            def get_publishers_info_by_topic(self, topic_name, no_mangle=False):
                return self._info_by_topic(topic_name, True)

            def get_subscriptions_info_by_topic(self, topic_name, no_mangle=False):
                return self._info_by_topic(topic_name, False)

            def get_node_names_and_namespaces(self):
                return [(n._name, n._namespace) for n in ros.nodes if not n.destroyed]

            def destroy_node(self):
                for pub in [p for p in ros.publishers if p.node is self]:
                    self.destroy_publisher(pub)
                for sub in [s for s in ros.subscriptions if s.node is self]:
                    self.destroy_subscription(sub)
                self.destroyed = True

            def call(self, handler) -> dict:
                """Queue a service request (``ros2 param get`` ...); served by the executor."""
                call = {'done': False, 'result': None}

                def serve():
                    call['result'], call['done'] = handler(), True
                self.work.append(serve)
                return call

        class LifecycleNode(Node):
            """rclpy.lifecycle.LifecycleNode: the state machine and its change_state service."""

            def __init__(self, node_name, **kwargs):
                super().__init__(node_name, **kwargs)
                self.state = 'unconfigured'
                self.transitions = []        # (transition, callback return)

            def _change_state(self, transition):
                sources, goal, callback = _TRANSITIONS[transition]
                if self.state not in sources:
                    raise RCLError(f'Failed to trigger lifecycle state machine transition '
                                   f'{transition!r} from {self.state!r}: transition is not '
                                   'registered')
                try:
                    ret = getattr(self, callback)(self.state)
                except Exception:  # noqa: B902 - rclpy's __execute_callback does the same
                    ret = TransitionCallbackReturn.ERROR
                if ret == TransitionCallbackReturn.SUCCESS:
                    self.state = goal
                elif ret == TransitionCallbackReturn.ERROR:
                    self.state = 'unconfigured'      # on_error's default: SUCCESS
                self.transitions.append((transition, ret))
                return ret

            def trigger_configure(self):
                return self._change_state('configure')

            def trigger_cleanup(self):
                return self._change_state('cleanup')

            def trigger_activate(self):
                return self._change_state('activate')

            def trigger_deactivate(self):
                return self._change_state('deactivate')

            def trigger_shutdown(self):
                return self._change_state('shutdown')

            def on_configure(self, state):
                return TransitionCallbackReturn.SUCCESS

            on_cleanup = on_activate = on_deactivate = on_shutdown = on_configure

            def request_change_state(self, transition) -> dict:
                """``ros2 lifecycle set <node> <transition>``: served by the executor."""
                call = {'transition': transition, 'done': False, 'success': None,
                        'at': None}

                def serve():
                    try:
                        ok = self._change_state(transition) == TransitionCallbackReturn.SUCCESS
                    except RCLError:
                        ok = False
                    call.update(done=True, success=ok, at=time.monotonic())
                self.work.append(serve)
                return call

        class SingleThreadedExecutor:
            """rclpy.executors.SingleThreadedExecutor."""

            def __init__(self, *, context=None):
                self._nodes = []
                self._is_shutdown = False
                self._executing = False
                ros.executors.append(self)

            @property
            def context(self):
                return ros

            def add_node(self, node):
                if node in self._nodes:
                    return False
                self._nodes.append(node)
                node.executor = self
                return True

            def remove_node(self, node):
                if node in self._nodes:
                    self._nodes.remove(node)

            def get_nodes(self):
                return list(self._nodes)

            def wake(self):
                pass

            def spin_once(self, timeout_sec=None):
                if self._executing:
                    ros.violation('spin_once() of an executor from one of its own callbacks')
                ros.tick()                   # (time passes, shut down or not)
                if self._is_shutdown:
                    return
                for node in list(self._nodes):
                    if node.work:
                        handler = node.work.popleft()
                        self._executing = True
                        ros.running.append(self)
                        try:
                            handler()
                        finally:
                            ros.running.pop()
                            self._executing = False
                        return
                wait = 0.001 if timeout_sec is None or timeout_sec < 0 else timeout_sec
                time.sleep(min(wait, 0.001))

            def shutdown(self, timeout_sec=None):
                self._is_shutdown = True
                if self._executing:        # it waits until no callback runs: this one runs
                    if timeout_sec is None or timeout_sec < 0:
                        ros.violation('Executor.shutdown() from one of its own callbacks '
                                      'waits for that callback forever')
                    return False
                self._nodes = []
                return True

        return Node, SingleThreadedExecutor, LifecycleNode


class QoSProfile:
    """rclpy.qos.QoSProfile (keyword fields)."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class RemoteEndpoint:
    """A reader or writer of another process on the graph (:meth:`Ros.add_remote`)."""

    def __init__(self, prefix, node_name, namespace, topic, writer, topic_type, type_hash,
                 entity):
        self.prefix, self.node_name, self.namespace = prefix, node_name, namespace
        self.topic, self.writer, self.topic_type = topic, writer, topic_type
        self.type_hash, self.entity, self.gone = type_hash, entity, False


class TypeHash:
    """``rclpy.type_hash.TypeHash`` (Iron and newer): ``version`` and 32 bytes."""

    __slots__ = ['_version', '_value']

    def __init__(self, version=-1, value=bytes(32)):
        assert isinstance(version, int) and isinstance(value, bytes)
        self._version, self._value = version, value

    @property
    def version(self):
        return self._version

    @property
    def value(self):
        return self._value

    def __str__(self):
        if self._version <= 0 or len(self._value) != 32:
            return 'INVALID'
        return f'RIHS{self._version:02}_{self._value.hex()}'


class TopicEndpointInfoHumble:
    """``rclpy.topic_endpoint_info.TopicEndpointInfo`` of Humble: no ``topic_type_hash``."""

    __slots__ = ['_node_name', '_node_namespace', '_topic_type', '_endpoint_type',
                 '_endpoint_gid', '_qos_profile']

    def __init__(self, **kwargs):
        assert all('_' + key in TopicEndpointInfoHumble.__slots__ for key in kwargs), kwargs
        for key, value in kwargs.items():
            setattr(self, '_' + key, value)
        assert all(isinstance(x, int) for x in self._endpoint_gid)

    node_name = property(lambda self: self._node_name)
    node_namespace = property(lambda self: self._node_namespace)
    topic_type = property(lambda self: self._topic_type)
    endpoint_type = property(lambda self: self._endpoint_type)
    endpoint_gid = property(lambda self: self._endpoint_gid)
    qos_profile = property(lambda self: self._qos_profile)


class TopicEndpointInfo(TopicEndpointInfoHumble):
    """The same of Iron and newer: with ``topic_type_hash`` (a :class:`TypeHash`)."""

    __slots__ = ['_topic_type_hash']

    def __init__(self, topic_type_hash=None, **kwargs):
        super().__init__(**kwargs)
        self._topic_type_hash = TypeHash() if topic_type_hash is None else topic_type_hash

    topic_type_hash = property(lambda self: self._topic_type_hash)


def _hash_of(topic_type: str):
    """Return this build's RIHS01 hash of ``'pkg/msg/Type'`` (None for a type not here)."""
    from rog_ros.transport.field_plans import MSG_DEFS
    from rog_ros.transport.typehash import rihs01
    pkg, _, name = topic_type.partition('/msg/')
    return rihs01(f'{pkg}/{name}', MSG_DEFS) if f'{pkg}/{name}' in MSG_DEFS else None


_RELOADED = ('rog_ros.nodes.ros_node',)
"""rog_ros modules that import rclpy at import time and are imported before a test."""
_FORGOTTEN = ('rog_ros.transport.rclpy_bus',)
"""rog_ros modules that import rclpy at import time: imported afresh under the stand-ins."""


def _forget(name: str) -> None:
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition('.')
    if parent in sys.modules and hasattr(sys.modules[parent], child):
        delattr(sys.modules[parent], child)


def install(monkeypatch, deadline_s: float = 20.0, distro: str = 'jazzy') -> Ros:
    """Install the stand-ins (``distro``'s graph API) into ``sys.modules``; return them."""
    import rog_ros
    ros = Ros(deadline_s, distro)
    for name, mod in ros.build_modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(rog_ros, 'msg', sys.modules['rog_ros.msg'], raising=False)
    for name in _FORGOTTEN:
        _forget(name)
    for name in _RELOADED:
        importlib.reload(importlib.import_module(name))
    return ros


def uninstall(monkeypatch) -> None:
    """Undo :func:`install` (and every other patch of ``monkeypatch``)."""
    monkeypatch.undo()
    for name in _FORGOTTEN:
        _forget(name)
    for name in _RELOADED:
        importlib.reload(importlib.import_module(name))
