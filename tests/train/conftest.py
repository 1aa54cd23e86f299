"""Fixtures of the trainer's tests (agentfly_train; the `train` extra)."""

import pytest

from agentfly_train.models import load_tokenizer


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir):
    """SmolLM2's real tokenizer and chat template."""
    return load_tokenizer(smollm2_dir)


@pytest.fixture
async def openrlhf_actor(smollm2_dir, monkeypatch, tmp_path):
    """Starts OpenRLHF 0.11.2's own vLLM rollout actor in this process: ``await openrlhf_actor(settings,
    max_model_len)`` (vLLM's CPU build, SmolLM2-135M in float32).

    ``RolloutRayActor`` is built as its plain class instead of as a Ray actor (its ``__init__`` is a coroutine:
    awaited by hand, as Ray would); it loads the agent file the launcher writes for ``settings`` (``write_plugin``,
    into ``tmp_path/plugin``) by path, as OpenRLHF does. Every vLLM output its ``generate`` returns is recorded in
    its ``outputs``: ``(prompt token ids, sampling params, CompletionOutput)``. The env pools, the gateways and the
    engine are closed after the test. Used by test_openrlhf_vllm.py and test_openrlhf_program_vllm.py.
    """
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor

    from agentfly_train.backends.openrlhf import executor, program_executor
    from agentfly_train.backends.openrlhf.settings import write_plugin

    monkeypatch.setenv("RAY_ADDRESS", "unused:0")  # the actor records Ray's address; no Ray runs here
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    engines = []

    async def start(settings, max_model_len):
        agent_file = write_plugin(tmp_path / "plugin", settings)
        cls = RolloutRayActor.__ray_metadata__.modified_class
        engine = cls.__new__(cls)
        await cls.__init__(
            engine,
            model=smollm2_dir,
            agent_func_path=str(agent_file),
            num_gpus=0,
            dtype="float32",
            seed=0,
            enforce_eager=True,
            max_model_len=max_model_len,
        )
        engines.append(engine)
        engine.outputs = []
        generate = engine.generate

        async def recording(prompt_token_ids, sampling_params, multi_modal_data=None):
            output = await generate(prompt_token_ids, sampling_params, multi_modal_data)
            engine.outputs.append((list(prompt_token_ids), sampling_params, output.outputs[0]))
            return output

        engine.generate = recording
        return engine

    yield start
    await program_executor.close_gateways()
    await executor.close_pools()
    for engine in engines:
        engine.llm.shutdown()
