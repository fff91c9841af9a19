"""Harbor's classification of trial failures, mirrored: which exceptions leave a valid reward.

Harbor decides, per exception type name, whether a trial is retried, graded, and whether its reward
is still valid (``harbor/models/trial/error_policy.py``, Harbor 0.26.0). A trial's reward is valid
when its verifier recorded a non-empty ``rewards`` dict and every recorded exception (the trial's
``exception_info``, then each step's) has ``has_valid_reward`` under its policy
(``TrialResult.reward_valid``). Each ``ExceptionInfo`` may carry a ``policy_override`` (the trial
config's ``override_error_policy`` entry for that type, resolved when the exception was recorded);
its non-null fields replace the table's. An exception type the table does not name gets Harbor's
unknown-error policy (retried, graded, reward valid).

This module holds only that table, as data: which types keep a valid reward and which do not. The
adapter applies it with polars expressions (:mod:`recoverylab.adapters.harbor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["ERROR_POLICIES", "UNKNOWN_ERROR_POLICY", "ErrorPolicy", "has_valid_reward"]


@dataclass(frozen=True)
class ErrorPolicy:
    """What Harbor does with a trial that recorded an exception of one type."""

    should_retry: bool
    should_grade: bool
    has_valid_reward: bool


#: Harbor's policy for an exception type its table does not name.
UNKNOWN_ERROR_POLICY = ErrorPolicy(should_retry=True, should_grade=True, has_valid_reward=True)

_GROUPS: dict[ErrorPolicy, tuple[str, ...]] = {
    # infrastructure: the environment or the agent's setup never came up
    ErrorPolicy(should_retry=True, should_grade=False, has_valid_reward=False): (
        "EnvironmentStartTimeoutError",
        "SandboxBuildFailedError",
        "AgentSetupTimeoutError",
        "HealthcheckError",
        "SandboxLikelyOutOfMemoryError",
        "MemoryLimitExceededError",
        "SSHAccessError",
        "GKEExecStreamClosedError",
        "GKEPodNotFoundError",
        "RuntimeRequestError",
        "AddTestsDirError",
        "DownloadVerifierDirError",
    ),
    # transient model-provider failures (Harbor's and litellm's names)
    ErrorPolicy(should_retry=True, should_grade=True, has_valid_reward=False): (
        "ApiError",
        "ApiRateLimitError",
        "ApiInternalServerError",
        "ApiOverloadedError",
        "ApiConnectionClosedError",
        "ApiResponseStalledError",
        "UnknownApiError",
        "NetworkConnectionError",
        "ApiConnectionError",
        "ApiUsageLimitError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "APIConnectionError",
        "APIError",
        "Timeout",
    ),
    # permanent request or verifier failures: no reward to trust, no point retrying
    ErrorPolicy(should_retry=False, should_grade=True, has_valid_reward=False): (
        "UnsupportedModelParametersError",
        "BadRequestError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "APIResponseValidationError",
        "BudgetExceededError",
        "VerifierTimeoutError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
    ),
    # configuration failures and cancellations
    ErrorPolicy(should_retry=False, should_grade=False, has_valid_reward=False): (
        "AgentAuthenticationError",
        "ModelNotFoundError",
        "ApiProviderResourceNotFoundError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
        "ServiceOperationsUnsupportedError",
        "VercelScopeError",
        "DspyImportError",
        "MissingExtraError",
        "RegradeError",
        "CancelledError",
    ),
    # the agent's own failures: the verifier still grades what the agent left (an outcome)
    ErrorPolicy(should_retry=False, should_grade=True, has_valid_reward=True): (
        "NonZeroAgentExitCodeError",
        "AgentTimeoutError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
        "AgentSafetyRefusalError",
        "ContentPolicyViolationError",
    ),
}

#: Exception type name -> Harbor's policy for it.
ERROR_POLICIES = MappingProxyType(
    {name: policy for policy, names in _GROUPS.items() for name in names}
)


def has_valid_reward() -> dict[str, bool]:
    """Exception type name -> whether a trial that recorded it keeps a valid reward."""
    return {name: policy.has_valid_reward for name, policy in ERROR_POLICIES.items()}
