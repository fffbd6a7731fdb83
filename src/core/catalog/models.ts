import { modelFromHfConfig } from './hfConfig';
import type { ModelSpec } from './types';

/** Architecture numbers from each model's published config.json; parameter counts are computed. */
export const MODELS: ModelSpec[] = [
  modelFromHfConfig(
    {
      model_type: 'qwen3',
      hidden_size: 4096,
      num_hidden_layers: 36,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 128,
      intermediate_size: 12288,
      vocab_size: 151936,
      tie_word_embeddings: false,
      max_position_embeddings: 40960,
    },
    'qwen3-8b',
    'Qwen/Qwen3-8B config.json',
  ),
];
