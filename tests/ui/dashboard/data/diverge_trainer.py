# A Hugging Face Trainer run that diverges, as a user's run does: a tiny random Llama trained with
# a learning rate of 1e30, so that from step 2 on its gradient norm is NaN. transformers writes
# the checkpoints' trainer_state.json with "grad_norm": NaN (Python's json), which
# tst_diverged_trainer_run opens in the studio's dashboard. Usage: diverge_trainer.py OUTPUT_DIR
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
torch.manual_seed(0)
out = sys.argv[1]
config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(config)
g = torch.Generator().manual_seed(1)
rows = [{"input_ids": ids, "labels": ids.clone()} for ids in torch.randint(0, 128, (32, 16), generator=g)]
args = TrainingArguments(output_dir=out, per_device_train_batch_size=2, max_steps=8,
                         learning_rate=1e30, logging_steps=1, save_steps=4, report_to="none",
                         use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
Trainer(model=model, args=args, train_dataset=rows).train()
